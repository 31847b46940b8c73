"""Data flows one way: a lower layer never imports a higher one, and there are no import cycles."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# lowest first; mashbill.errors and mashbill.__init__ sit below everything, the CLI above everything
LAYERS = ["specs", "factory", "validators", "curation", "trainers", "exporters"]
FOLDER = {name: ROOT / name for name in LAYERS}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
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
