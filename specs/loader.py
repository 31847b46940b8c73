"""Load a spec, resolve every file it references, validate them, and compute its content hash."""

from __future__ import annotations

import csv
import hashlib
import io
import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from pydantic import BaseModel, ValidationError

from mashbill import jsontext
from mashbill.errors import SpecError
from mashbill.hashing import canonical_json, sha256_bytes
from mashbill.specs.catalog import render_catalog
from mashbill.specs.examples import VARIABLE as EXAMPLES_VAR
from mashbill.specs.examples import load_bank
from mashbill.specs.model import PLACEHOLDER_RE, PromptFile, Spec, TaxonomyFile, ToolCatalogFile
from mashbill.specs.yamlio import line_for, load_yaml, raise_validation_error

LIBRARY = Path(__file__).resolve().parent / "library"
RUNTIME_VARS = {"query", "lang", "framing", "taxonomy", "tool_catalog", "output_schema"}
# What a `queries` spec's prompt may use (factory.generate.synth fills them per call) and what its queries carry.
SYNTH_VARS = {"examples", "n", "cell_hint", "type", "trap", "rule", "language", "call"}
QUERY_FIELDS = {"query", "lang", "type", "trap", "rule", "source", "licence", "lineage"}
FORMATS = {".jsonl": "jsonl", ".csv": "csv", ".tsv": "tsv", ".parquet": "parquet", ".json": "json"}


@dataclass(frozen=True)
class ResolvedSpec:
    """A spec with every reference loaded. `hash` covers content, never runtime knobs or absolute paths."""

    spec: Spec
    path: Path
    prompt_file: PromptFile
    taxonomy: TaxonomyFile | None
    catalog: ToolCatalogFile | None
    output_schema: dict
    seeds: tuple[dict, ...]  # rows of file and inline sources; `from_spec` sources are read from a store
    files: dict[str, str]  # role -> sha256 of the referenced file's bytes
    file_paths: dict[str, Path] = field(default_factory=dict)
    hash: str = ""
    seed_specs: tuple = ()  # (source index, ResolvedSpec) for each `seeds: {from_spec: ...}`
    bank: tuple = ()  # the rows of the `examples` bank (specs.examples.BankRow), checked

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def ref(self) -> str:
        return self.spec.ref

    @cached_property
    def tool_catalog_text(self) -> str:
        return render_catalog(self.catalog) if self.catalog else ""

    @property
    def home(self) -> Path:
        """The folder the spec's relative paths start from (spec_home: its kind's folder, also once archived)."""
        return spec_home(self.path)

    def canonical(self) -> dict:
        # Runtime knobs change speed, guards decide whether a run goes on, curation settings change which
        # stored records a snapshot takes: none changes what the teacher produces, so none may change ids.
        # The judge has its own hash (factory.generate.judge); a synthesis target only says when to stop asking.
        exclude = {"runtime": True, "curation": True, "guards": True, "judge": True, "synthesis": {"target"},
                   "repair": {"guard"}}
        files = {k: v for k, v in self.files.items() if not k.startswith("judge.")}
        return {"spec": self.spec.model_dump(mode="json", exclude=exclude), "files": files}


ARCHIVE = "archive"  # superseded versions: LIBRARY/archive/<kind>/<name>@<v>.yaml


def spec_home(spec_path: Path) -> Path:
    """The folder a spec's relative references start from. An archived spec (archive/<kind>/x.yaml) resolves them
    from its kind's folder, as it did before it was archived, so its text, and so its hash, never changes."""
    parent = spec_path.parent
    if parent.parent.name == ARCHIVE:
        return parent.parent.parent / parent.name
    return parent


def _resolve(spec_path: Path, rel: str, lines, field_path: tuple) -> Path:
    p = (spec_home(spec_path) / rel).resolve()
    if not p.is_file():
        raise SpecError(str(spec_path), f"referenced file not found: {rel} (looked at {p})",
                        line=line_for(lines, field_path), field=".".join(map(str, field_path)))
    return p


def load_model(path: Path, model: type[BaseModel]) -> tuple:
    """Load a YAML file into `model`; return (instance, key lines). Errors name file, line and field."""
    data, lines = load_yaml(path)
    if not isinstance(data, dict):
        raise SpecError(str(path), f"expected a mapping at the top level, found {type(data).__name__}", line=1)
    try:
        return model.model_validate(data), lines
    except ValidationError as exc:
        raise_validation_error(path, exc, lines)


def load_taxonomy(path: Path) -> TaxonomyFile:
    return load_model(path, TaxonomyFile)[0]


def load_catalog(path: Path) -> ToolCatalogFile:
    catalog, lines = load_model(path, ToolCatalogFile)
    for name, tool in catalog.tools.items():
        try:
            cls = jsonschema.validators.validator_for(tool.args)
            cls.check_schema(tool.args)
            cls(tool.args).validate(tool.example)
        except jsonschema.SchemaError as exc:
            raise SpecError(str(path), f"invalid JSON Schema for arguments: {exc.message}",
                            line=line_for(lines, ("tools", name, "args")), field=f"tools.{name}.args") from None
        except jsonschema.ValidationError as exc:
            raise SpecError(str(path), f"example does not match the tool's argument schema: {exc.message}",
                            line=line_for(lines, ("tools", name, "example")), field=f"tools.{name}.example") from None
    return catalog


def load_output_schema(path: Path, spec_path: Path, lines) -> dict:
    try:
        schema = jsontext.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise SpecError(str(path), f"output schema is not JSON: {exc.msg}", line=exc.lineno) from None
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = "/".join(map(str, exc.path)) or "(root)"
        raise SpecError(str(path), f"invalid JSON Schema at {where}: {exc.message}", field="output_schema") from None
    return schema


def read_seed_rows(path: Path, fmt: str | None, split: str | None = None, header: bool = True,
                   row_lines: list | None = None) -> list[dict]:
    """Rows of a seed file (or local Hugging Face dataset folder) as dicts; errors name the file and row.
    `row_lines`, when given, receives each row's line in a text file (so later errors can name it too)."""
    row_lines = [] if row_lines is None else row_lines
    fmt = fmt or ("hf" if path.is_dir() else FORMATS.get(path.suffix))
    if fmt is None:
        raise SpecError(str(path), "cannot tell the seed format from the suffix; set 'format'")
    if fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            return pq.read_table(path).to_pylist()
        except (pa.ArrowException, OSError) as exc:
            raise SpecError(str(path), f"not a readable Parquet file: {str(exc).splitlines()[0]}") from None
    if fmt == "hf":
        return _read_hf(path, split)
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise SpecError(str(path), f"row is not UTF-8 ({exc.reason} at byte {exc.start}); convert the file to UTF-8",
                        line=line) from None
    text = text.removeprefix("\ufeff")
    if fmt == "jsonl":
        rows = []
        for n, line in enumerate(text.split("\n"), 1):  # not splitlines: JSON strings may hold U+2028
            if not line.strip():
                continue
            try:
                row = jsontext.loads(line)
            except json.JSONDecodeError as exc:
                raise SpecError(str(path), f"row is not JSON: {exc.msg}", line=n) from None
            if not isinstance(row, dict):
                raise SpecError(str(path), "row is not a JSON object", line=n)
            rows.append(row)
            row_lines.append(n)
        return rows
    if fmt == "json":
        try:
            rows = jsontext.loads(text)
        except json.JSONDecodeError as exc:
            raise SpecError(str(path), f"not JSON: {exc.msg}", line=exc.lineno) from None
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise SpecError(str(path), "expected a JSON list of objects")
        return rows
    # TSV exports (MGSM, many benchmarks) do not quote: a quote character is text there
    opts = {"delimiter": "\t", "quoting": csv.QUOTE_NONE} if fmt == "tsv" else {"delimiter": ","}
    if not header:
        reader = csv.reader(io.StringIO(text, newline=""), **opts)
        rows = []
        for row in reader:
            if row:
                rows.append({str(i): v for i, v in enumerate(row)})
                row_lines.append(reader.line_num)
        return rows
    reader = csv.DictReader(io.StringIO(text, newline=""), **opts)
    rows = []
    for row in reader:
        if None in row:  # more cells than header columns
            raise SpecError(str(path), f"row has {len(row) - 1 + len(row[None])} cells, the header "
                            f"{len(reader.fieldnames or [])}", line=reader.line_num)
        if None in row.values():  # fewer cells than header columns: the missing ones would read as absent
            raise SpecError(str(path), f"row has {sum(v is not None for v in row.values())} cells, the header "
                            f"{len(reader.fieldnames or [])}", line=reader.line_num)
        rows.append(row)
        row_lines.append(reader.line_num)
    return rows


def _read_hf(path: Path, split: str | None) -> list[dict]:
    try:
        from datasets import DatasetDict, load_from_disk
    except ImportError:
        raise SpecError(str(path), "local Hugging Face datasets need the `datasets` package "
                        "(pip install 'mashbill[curation]')") from None
    try:
        ds = load_from_disk(str(path))
    except (FileNotFoundError, ValueError) as exc:
        raise SpecError(str(path), f"not a dataset saved with save_to_disk: {exc}") from None
    if isinstance(ds, DatasetDict):
        if split is None or split not in ds:
            raise SpecError(str(path), f"a DatasetDict: set 'split' to one of {sorted(ds)}")
        ds = ds[split]
    return ds.to_list()


def _seed_spec(spec_path: Path, ref: str, lines, i: int) -> "ResolvedSpec":
    """The `queries` spec a `from_spec` seed source names: a path, or NAME@V beside this spec's kind folder."""
    if ref.endswith((".yaml", ".yml")):
        p = _resolve(spec_path, ref, lines, ("seeds", i, "from_spec"))
    else:
        root = spec_home(spec_path).parent
        p = next((f for f in find_spec_files(root, archived=True) if f.stem == ref or f.stem.partition("@")[0] == ref), None)
        if p is None:
            raise SpecError(str(spec_path), f"seeds.{i}.from_spec: no spec {ref} under {root}",
                            line=line_for(lines, ("seeds", i, "from_spec")), field=f"seeds.{i}.from_spec")
    src = load_spec(p)
    if src.spec.kind != "queries":
        raise SpecError(str(spec_path), f"seeds.{i}.from_spec: {src.ref} is a {src.spec.kind} spec; seeds come "
                        "from a queries spec", line=line_for(lines, ("seeds", i, "from_spec")),
                        field=f"seeds.{i}.from_spec")
    return src


def _seed_inputs(spec: Spec, spec_path: Path, lines, files: dict, file_paths: dict, seed_specs: list,
                 rows_wanted: bool = True) -> tuple[dict, ...]:
    out: list[dict] = []
    for i, src in enumerate(spec.seeds):
        if src.from_spec is not None:
            qs = _seed_spec(spec_path, src.from_spec, lines, i)
            files[f"seeds.{i}"] = qs.hash  # lineage: a changed queries spec changes this spec's hash
            seed_specs.append((i, qs))
            continue
        row_lines: list[int] = []  # each row's line in a text seed file
        if src.inline is not None:
            rows, where = src.inline, str(spec_path)
        else:
            p = _resolve_seed(spec_path, src.path, lines, i)
            files[f"seeds.{i}"] = _content_hash(p)
            file_paths[f"seeds.{i}"] = p
            if not rows_wanted:  # hashed (the spec's hash), not read
                continue
            rows, where = read_seed_rows(p, src.format, src.split, src.header, row_lines), str(p)
        if not rows:
            # A spec with no inputs is a mistake (an empty or truncated export), not a run of zero records.
            raise SpecError(where, "no seed rows" + (" (the file is empty)" if src.inline is None else ""),
                            field=f"seeds.{i}", line=line_for(lines, ("seeds", i)) if src.inline is not None else None)
        for n, row in enumerate(rows[: src.limit] if src.limit else rows, 1):
            at = row_lines[n - 1] if len(row_lines) >= n else None  # the file line, where the file has lines
            if src.columns:
                missing = [col for col in src.columns.values() if col not in row]
                if missing:
                    raise SpecError(where, f"seed row {n} lacks column(s) {missing} (has {sorted(row)})",
                                    field=f"seeds.{i}.columns",
                                    line=line_for(lines, ("seeds", i, "columns")) if where == str(spec_path) else at)
                row = {ours: row[col] for ours, col in src.columns.items()}
            query = row.get("query")
            if not isinstance(query, str) or not query.strip():
                raise SpecError(where, f"seed row {n} has no non-empty 'query' (map one with 'columns')",
                                field=f"seeds.{i}", line=at)
            row = {k: v for k, v in row.items() if v is not None}
            for key in ("source", "licence"):
                if getattr(src, key) is not None:
                    row.setdefault(key, getattr(src, key))
            out.append(row)
    return tuple(out)


def _resolve_seed(spec_path: Path, rel: str, lines, i: int) -> Path:
    p = (spec_home(spec_path) / rel).resolve()
    if not p.exists():
        raise SpecError(str(spec_path), f"referenced file not found: {rel} (looked at {p})",
                        line=line_for(lines, ("seeds", i, "path")), field=f"seeds.{i}.path")
    return p


def _content_hash(p: Path) -> str:
    """sha256 of a file, or of a folder's files (name and content) for a saved Hugging Face dataset."""
    if p.is_file():
        return sha256_bytes(p.read_bytes())
    h = hashlib.sha256()
    for f in sorted(x for x in p.rglob("*") if x.is_file()):
        h.update(f.relative_to(p).as_posix().encode() + b"\0" + hashlib.sha256(f.read_bytes()).digest())
    return h.hexdigest()


def _rule_includes(rules: Path, files: dict, file_paths: dict) -> None:
    """A file the rule set reads besides itself (`recall_request.cues`, relative to the rule set) is part of the
    spec's content: hashed and shipped like the rule set (the rule set's own loader checks it)."""
    data, _ = load_yaml(rules)
    rel = ((data or {}).get("recall_request") or {}).get("cues") if isinstance(data, dict) else None
    if isinstance(rel, str) and (p := (rules.parent / rel).resolve()).is_file():
        files["rules.recall_cues"] = sha256_bytes(p.read_bytes())
        file_paths["rules.recall_cues"] = p


def load_spec(path: str | Path, *, seed_rows: bool = True) -> ResolvedSpec:
    """A spec with every reference loaded and its content hash. Without `seed_rows`, seed files are hashed but not
    read (`seeds` is empty, and templates are not checked against their columns): for commands that only look
    records of the spec up by its hash, such as a freeze, where 150,000 seed rows were a second of a freeze's 8."""
    path = Path(path).resolve()
    spec, lines = load_model(path, Spec)
    if "@" in path.stem and path.stem != spec.ref:
        raise SpecError(str(path), f"file is named {path.stem} but declares {spec.ref}; rename the file or fix "
                        "name/version", line=line_for(lines, ("version",)), field="version")
    files: dict[str, str] = {}
    file_paths: dict[str, Path] = {}

    def ref(role: str, rel: str, field_path: tuple) -> Path:
        p = _resolve(path, rel, lines, field_path)
        files[role] = sha256_bytes(p.read_bytes())
        file_paths[role] = p
        return p

    prompt_file = load_model(ref("prompt", spec.prompt.file, ("prompt", "file")), PromptFile)[0]
    for name in spec.prompt.framings:
        if name not in prompt_file.framings:
            raise SpecError(str(path), f"framing '{name}' is not defined in {spec.prompt.file} "
                            f"(defined: {sorted(prompt_file.framings)})",
                            line=line_for(lines, ("prompt", "framings")), field="prompt.framings")
    taxonomy = load_taxonomy(ref("taxonomy", spec.taxonomy.file, ("taxonomy", "file"))) if spec.taxonomy else None
    catalog = load_catalog(ref("tools", spec.tools.file, ("tools", "file"))) if spec.tools else None
    schema = load_output_schema(ref("output_schema", spec.output_schema, ("output_schema",)), path, lines)
    if spec.rules:
        _rule_includes(ref("rules", spec.rules, ("rules",)), files, file_paths)
    template = spec.trainer_profile.chat_template
    if template and template.endswith((".jinja", ".j2")):
        ref("chat_template", template, ("trainer_profile", "chat_template"))
    for i, h in enumerate(spec.holdout):
        ref(f"holdout.{i}", h, ("holdout", i))
    seed_specs: list = []
    seeds = _seed_inputs(spec, path, lines, files, file_paths, seed_specs, seed_rows)
    bank: tuple = ()
    if spec.examples is not None:
        bank = load_bank(ref("examples.bank", spec.examples.bank, ("examples", "bank")))
    if spec.judge is not None:
        for role, rel, fp in (("judge.score_schema", spec.judge.score_schema, ("judge", "score_schema")),
                              ("judge.pair_schema", spec.judge.pair_schema, ("judge", "pair_schema"))):
            if rel:
                load_output_schema(ref(role, rel, fp), path, lines)
        for part, tpl, allowed in (("prompt", spec.judge.prompt, {"rubric", "query", "output"}),
                                   ("pair_prompt", spec.judge.pair_prompt, {"rubric", "query", "output_a", "output_b"})):
            for side in ("system", "user") if tpl else ():
                bad = sorted(set(PLACEHOLDER_RE.findall(getattr(tpl, side))) - allowed)
                if bad:
                    raise SpecError(str(path), f"judge template uses {bad}; it may use {sorted(allowed)}",
                                    line=line_for(lines, ("judge", part, side)), field=f"judge.{part}.{side}")

    known = set(prompt_file.blocks) | RUNTIME_VARS | {k for row in seeds for k in row}
    if seed_specs:
        known |= QUERY_FIELDS
    if spec.kind == "queries":
        known |= SYNTH_VARS
    if spec.examples is not None:
        known.add(EXAMPLES_VAR)
        t = spec.prompt.teacher
        if EXAMPLES_VAR not in PLACEHOLDER_RE.findall(t.system + "\n" + t.user):
            raise SpecError(str(path), f"an examples section, but the teacher template never uses "
                            f"{{{{ {EXAMPLES_VAR} }}}}", line=line_for(lines, ("examples",)), field="examples")
    if not spec.prompt.framings:
        known.discard("framing")
    if taxonomy is None:
        known.discard("taxonomy")
    if catalog is None:
        known.discard("tool_catalog")
    for side in ("teacher", "training") if seed_rows else ():  # (a template may name any seed column)
        for part in ("system", "user"):
            text = getattr(getattr(spec.prompt, side), part)
            for name in PLACEHOLDER_RE.findall(text):
                if name not in known:
                    raise SpecError(str(path), f"template uses {{{{ {name} }}}}, which is not a block of "
                                    f"{spec.prompt.file} nor a known variable ({', '.join(sorted(known))})",
                                    line=line_for(lines, ("prompt", side, part)), field=f"prompt.{side}.{part}")

    resolved = ResolvedSpec(spec, path, prompt_file, taxonomy, catalog, schema, seeds, files, file_paths,
                            seed_specs=tuple(seed_specs), bank=bank)
    digest = sha256_bytes(canonical_json(resolved.canonical()).encode())
    object.__setattr__(resolved, "hash", digest)
    return resolved


def _looks_like_spec(path: Path) -> bool:
    """A YAML file with a top-level 'kind' key; unparseable files count, so their errors surface."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError):
        return True
    return isinstance(data, dict) and "kind" in data


def find_spec_files(root: Path = LIBRARY, *, archived: bool = False) -> list[Path]:
    """Spec files under root: YAML files with a top-level 'kind' (shared/ holds referenced pieces). Superseded
    versions under archive/ only when `archived` (checking and locking take them; listing and "latest" do not)."""
    out = []
    for p in sorted(Path(root).rglob("*.yaml")):
        parts = p.relative_to(root).parts
        if "shared" in parts or (ARCHIVE in parts[:-1] and not archived) or not _looks_like_spec(p):
            continue
        out.append(p)
    return out


def find_spec(name: str, root: Path = LIBRARY) -> Path:
    """A spec by path, by 'name' (highest live version) or by 'name@version' (archived versions too)."""
    p = Path(name)
    if p.suffix in (".yaml", ".yml") and p.exists():
        return p
    want_name, _, want_version = name.partition("@")
    found: list[tuple[int, Path]] = []
    for f in find_spec_files(root, archived=bool(want_version)):
        stem_name, _, stem_version = f.stem.partition("@")
        if stem_name == want_name and (not want_version or stem_version == want_version):
            found.append((int(stem_version) if stem_version.isdigit() else 0, f))
    if not found:
        raise SpecError(name, f"no spec named '{name}' in {root} (try `mashbill spec ls`)")
    return max(found)[1]
