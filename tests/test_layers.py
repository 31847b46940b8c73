"""Data flows one way: a lower layer never imports a higher one, and there are no import cycles."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# lowest first; mashbill.errors and mashbill.__init__ sit below everything, the CLI above everything
LAYERS = ["specs", "factory", "validators", "curation", "trainers", "exporters"]
FOLDER = {name: ROOT / name for name in LAYERS}


def _imports(path: Path) -> set[str]:
    """Every absolute import in the file, module level or inside a function (a lazy import is still a dependency)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            # `from mashbill.curation import split` imports the module mashbill.curation.selection.split
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(["mashbill", *parts] if parts[0] in LAYERS else parts)


def _module_graph() -> dict[str, set[str]]:
    """Project module -> the project modules it imports (package __init__ files count as modules)."""
    paths = [p for layer in [*LAYERS, "mashbill"] for p in (ROOT / layer).rglob("*.py")]
    names = {_module_name(p): p for p in paths}
    return {name: {m for m in _imports(path) if m in names and m != name} for name, path in names.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each a cycle of imports."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_layers_import_only_downwards():
    problems = []
    for rank, layer in enumerate(LAYERS):
        for path in FOLDER[layer].rglob("*.py"):
            for mod in _imports(path):
                parts = mod.split(".")
                if parts[0] in LAYERS:
                    problems.append(f"{path.relative_to(ROOT)} imports '{mod}' without the mashbill. prefix")
                if parts[0] != "mashbill" or len(parts) < 2:
                    continue
                target = parts[1]
                if target == "cli":
                    problems.append(f"{path.relative_to(ROOT)} imports the CLI ({mod})")
                elif target in LAYERS and LAYERS.index(target) > rank:
                    problems.append(f"{path.relative_to(ROOT)} ({layer}) imports higher layer {mod}")
    assert not problems, "\n".join(problems)


def test_core_modules_do_not_import_heavy_dependencies_at_module_level():
    heavy = {"torch", "transformers", "great_expectations", "argilla", "vllm", "datasets", "llama_cpp", "onnx",
             "onnxruntime", "peft", "gguf", "safetensors", "tokenizers"}
    problems = []
    for layer in LAYERS:
        for path in FOLDER[layer].rglob("*.py"):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in tree.body:  # module level only; imports inside functions are lazy on purpose
                names = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module:
                    names = [node.module]
                for name in names:
                    if name.split(".")[0] in heavy:
                        problems.append(f"{path.relative_to(ROOT)}: module-level import of {name}")
    assert not problems, "\n".join(problems)


def _is_package_parent(a: str, b: str) -> bool:
    return b.startswith(a + ".") or a.startswith(b + ".")


def test_no_import_cycles():
    # A package's __init__ re-exporting its own submodules is not a cycle between concepts; drop those edges.
    graph = {m: {d for d in deps if not _is_package_parent(m, d)} for m, deps in _module_graph().items()}
    cycles = _cycles(graph)
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_cycle_detection_finds_a_cycle():
    # the detector itself can fail: a two-module and a three-module cycle are found, a chain is not
    graph = {"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"e"}, "e": {"c"}, "f": {"a"}}
    assert _cycles(graph) == [["a", "b"], ["c", "d", "e"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


# The store is the only door to the data: outside factory/ nothing touches a store's DuckDB connection
# (`.con`) or hands it SQL (`.sql(`), except the `mashbill sql` command, whose job is user-typed SQL.
DOOR_FOLDERS = [*[layer for layer in LAYERS if layer != "factory"], "mashbill", "bench"]
SQL_ALLOWED = {"mashbill/cli/curate/sql.py"}


def _door_breaches(source: str, rel: str) -> list[str]:
    """`.con` attribute uses and `.sql(...)` calls in one module's source, as 'file:line: what' strings."""
    found = []
    for node in ast.walk(ast.parse(source, filename=rel)):
        if isinstance(node, ast.Attribute) and node.attr == "con":
            found.append(f"{rel}:{node.lineno}: uses .con (the store's connection); add a named Store method")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "sql"
              and rel not in SQL_ALLOWED):
            found.append(f"{rel}:{node.lineno}: passes SQL through .sql(); add a named Store method")
    return sorted(found, key=lambda f: int(f.split(":")[1]))


def test_the_store_is_the_only_door():
    problems = []
    for folder in DOOR_FOLDERS:
        for path in (ROOT / folder).rglob("*.py"):
            rel = path.relative_to(ROOT).as_posix()
            problems += _door_breaches(path.read_text(encoding="utf-8"), rel)
    assert not problems, "\n".join(problems)


def test_door_detector_finds_raw_sql_and_allows_named_methods():
    code = ("def f(store):\n"
            "    a = store.con.execute('SELECT 1')\n"
            "    b = store.sql('SELECT 2')\n"
            "    c = store.verdict_counts('h')\n"
            "    d = store.connection\n")
    assert _door_breaches(code, "curation/x.py") == [
        "curation/x.py:2: uses .con (the store's connection); add a named Store method",
        "curation/x.py:3: passes SQL through .sql(); add a named Store method"]
    # the sql command may pass user SQL, but never the raw connection
    assert _door_breaches(code, "mashbill/cli/curate/sql.py") == [
        "mashbill/cli/curate/sql.py:2: uses .con (the store's connection); add a named Store method"]



# Bench scripts are experiments and measurements, not product: tests/ may run one as a command, never import it
# (its own tests live beside it in bench/checks/).
BENCH_SCRIPTS = {p.stem for p in (ROOT / "bench").rglob("*.py")}


def _bench_imports(source: str, rel: str) -> list[str]:
    """Imports of a bench script, and bench/ put on sys.path, in one test module, as 'file:line: what' strings."""
    found = []
    for node in ast.walk(ast.parse(source, filename=rel)):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        found += [f"{rel}:{node.lineno}: imports bench script {n}" for n in names
                  if n.split(".")[0] in BENCH_SCRIPTS and not n.startswith(("mashbill", "tests"))]
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and (node.func.attr == "spec_from_file_location"
                     or node.func.attr in {"insert", "append"} and ast.unparse(node.func.value) == "sys.path")
                and "bench" in ast.unparse(node)):
            found.append(f"{rel}:{node.lineno}: loads code from bench/")
    return sorted(found, key=lambda f: int(f.split(":")[1]))


def test_no_test_imports_a_bench_script():
    problems = []
    for path in (ROOT / "tests").rglob("*.py"):
        rel = path.relative_to(ROOT).as_posix()
        problems += _bench_imports(path.read_text(encoding="utf-8"), rel)
    assert not problems, "\n".join(problems)


def test_bench_import_detector_finds_both_ways():
    code = ("import sys\n"
            "sys.path.insert(0, str(ROOT / 'bench'))\n"
            "import trigger_set\n"
            "from mashbill.specs import loader\n"
            "subprocess.run([sys.executable, str(ROOT / 'bench' / 'trigger_set.py')])\n")
    assert _bench_imports(code, "tests/x.py") == ["tests/x.py:2: loads code from bench/",
                                                  "tests/x.py:3: imports bench script trigger_set"]
