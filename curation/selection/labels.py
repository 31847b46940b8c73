"""Labels of a record and the balancing cell it falls in.

A cell is one value per dimension, joined with "/": with dims (category, complexity, lang) a German
single-tool plan is `precision_tools/trivial/de`. Dimensions are built-in names or dotted paths into the
record (`input.type`, `output.complexity`, `meta.prompt_variant`).
"""

from __future__ import annotations

from typing import Any

from mashbill.errors import MashbillError

DEFAULT_DIMS = {
    "plan": ["category", "complexity", "lang"],
    "preference": ["source", "lang"],
    "complexity": ["complexity", "lang"],
    "routing": ["category", "complexity", "lang"],
    "template": ["lang"],
}
BUILTIN = ("category", "categories", "complexity", "lang", "n_tasks", "type", "source")
MISSING = "none"


def plan_categories(output: Any, meta: dict) -> list[str]:
    if not isinstance(output, list):
        return []
    renamed = meta.get("taxonomy_renamed") or {}  # renames shown for this record map back to the canonical name
    return [renamed.get(t["category"], t["category"]) for t in output
            if isinstance(t, dict) and isinstance(t.get("category"), str)]


def _plan_complexity(n: int) -> str:
    # the orchestrator's task budget (trivial 1, moderate up to 3, complex 4), read backwards
    return "trivial" if n <= 1 else "moderate" if n <= 3 else "complex"


def _path(obj: Any, parts: list[str]) -> Any:
    for p in parts:
        if isinstance(obj, dict):
            obj = obj.get(p)
        elif isinstance(obj, list) and p.isdigit() and int(p) < len(obj):
            obj = obj[int(p)]
        else:
            return None
    return obj


def label_value(dim: str, kind: str, inputs: dict, output: Any, meta: dict, source: str | None = None) -> str:
    """One dimension's value as a string (lists are joined with '+'); MISSING when absent."""
    if "." in dim:
        root, *rest = dim.split(".")
        base = {"input": inputs, "output": output, "meta": meta}.get(root)
        if base is None:
            raise MashbillError(f"label dimension '{dim}': expected input.X, output.X or meta.X or one of "
                                f"{', '.join(BUILTIN)}")
        value = _path(base, rest)
    elif dim == "lang":
        value = inputs.get("lang") or meta.get("lang")
    elif dim == "type":
        value = inputs.get("type")
    elif dim == "source":
        value = source
    elif dim in ("category", "categories"):
        if kind in ("plan", "preference"):
            cats = plan_categories(output, meta)
            value = (cats[0] if cats else None) if dim == "category" else sorted(set(cats))
        elif kind == "routing" and isinstance(output, dict):
            experts = output.get("experts") or []
            value = (experts[0] if experts else None) if dim == "category" else sorted(set(experts))
        elif kind == "template" and isinstance(output, dict):
            value = sorted((output.get("experts") or {}).keys())
        else:
            value = None
    elif dim == "complexity":
        if isinstance(output, dict) and isinstance(output.get("complexity"), str):
            value = output["complexity"]
        elif inputs.get("complexity"):
            value = inputs["complexity"]
        elif kind in ("plan", "preference") and isinstance(output, list):
            value = _plan_complexity(len(output))
        else:
            value = None
    elif dim == "n_tasks":
        value = len(output) if isinstance(output, list) else None
    else:
        raise MashbillError(f"unknown label dimension '{dim}' (built-in: {', '.join(BUILTIN)}; "
                            "or a path such as input.type, output.complexity, meta.prompt_variant)")
    if value is None or value == "" or value == []:
        return MISSING
    if isinstance(value, list):
        return "+".join(map(str, value))
    return str(value)


def dims_for(kind: str, configured: list[str]) -> list[str]:
    return list(configured) if configured else list(DEFAULT_DIMS.get(kind, ["lang"]))


def labels_of(dims: list[str], kind: str, inputs: dict, output: Any, meta: dict, source: str | None = None
              ) -> dict[str, str]:
    return {d: label_value(d, kind, inputs, output, meta, source) for d in dims}


def cell_name(labels: dict[str, str], dims: list[str]) -> str:
    return "/".join(labels[d] for d in dims)


def classification_label(kind: str, output: Any, meta: dict) -> str | list[str] | None:
    """The label a classifier learns: one class (complexity) or several (plan categories, routing experts)."""
    if kind == "complexity" and isinstance(output, dict):
        return output.get("complexity")
    if kind in ("plan", "preference"):
        return sorted(set(plan_categories(output, meta)))
    if kind == "routing" and isinstance(output, dict):
        return sorted(set(output.get("experts") or []))
    if kind == "template" and isinstance(output, dict):
        return sorted((output.get("experts") or {}).keys())
    return None


def class_list(value) -> list[str]:
    """A classification label as the list a snapshot row holds."""
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def class_names(kind: str, output_schema: dict, taxonomy=None) -> tuple[list[str], str]:
    """(class names, problem type) a classifier over `kind` predicts, from the spec, not from the labels that
    happened to occur, so class ids are stable across snapshots of the same spec. Complexity: the schema's
    enum (single label); plans, routing and templates: the taxonomy's categories then its structural ones
    (multi-label)."""
    if kind == "complexity":
        enum = (((output_schema or {}).get("properties") or {}).get("complexity") or {}).get("enum") or []
        return [str(x) for x in enum], "single_label_classification"
    names = [*taxonomy.categories, *taxonomy.structural] if taxonomy is not None else []
    return list(dict.fromkeys(names)), "multi_label_classification"
