"""Read a GGUF file's key/value metadata, and copy a GGUF with `mashbill.*` keys added (lineage, prompt, schema).

llama.cpp's quantizer copies every key of its source, so keys added to the F16 file reach Q8_0 and Q4_K_M.
"""

from __future__ import annotations

from pathlib import Path

from mashbill.exporters.runs import ExportError


def _gguf():
    from mashbill.validators.tokenizers.gguf_file import gguf_module

    return gguf_module(ExportError, "reading GGUF metadata")


def _reader(path: Path):
    from mashbill.validators.tokenizers.gguf_file import open_reader

    return open_reader(path, ExportError)


def read_kv(path: str | Path, *, arrays: bool = False) -> dict:
    """Scalar and string keys (token arrays only when `arrays`: they are large)."""
    from mashbill.validators.tokenizers.gguf_file import read_kv as read

    return read(path, ExportError, arrays=arrays)


def tensor_names(path: str | Path) -> list[str]:
    return [t.name for t in _reader(Path(path)).tensors]


def copy_with_metadata(src: Path, dst: Path, strings: dict[str, str]) -> None:
    """Write `dst` as `src` plus (or with replaced) string keys."""
    gguf = _gguf()
    reader = _reader(src)
    arch = reader.get_field(gguf.Keys.General.ARCHITECTURE).contents()
    writer = gguf.GGUFWriter(str(dst), arch=arch, endianess=reader.endianess)
    for field in reader.fields.values():
        # the writer adds the architecture and the GGUF.* header fields itself
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF.") or field.name in strings:
            continue
        val_type = field.types[0]
        sub_type = field.types[-1] if val_type == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), val_type, sub_type=sub_type)
    for key, value in sorted(strings.items()):
        writer.add_key_value(key, value, gguf.GGUFValueType.STRING)
    for t in reader.tensors:
        writer.add_tensor_info(t.name, t.data.shape, t.data.dtype, t.data.nbytes, t.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for t in reader.tensors:
        writer.write_tensor_data(t.data, tensor_endianess=reader.endianess)
    writer.close()
