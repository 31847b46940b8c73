"""Safe YAML loading that remembers the line of every key, so errors can name it.

Hostile input is refused in one line before anything walks it: a file over MAX_BYTES, a recursive alias, or
aliases that expand to more than MAX_NODES nodes (an alias bomb: nine levels of nine aliases is 9**9 nodes); and a
surrogate escaped in a string, which nothing after the loader could encode or hash.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from mashbill.errors import SpecError
from mashbill.jsontext import lone_surrogate_in

_SURROGATE_ESCAPE = re.compile(r"\\(?:u|U0000)[dD][89a-fA-F]")

Lines = dict[tuple, int]
MAX_BYTES = 1 << 20  # a spec names its seeds, prompts and schemas by file; its own YAML is a few KB
MAX_NODES = 100_000  # nodes after expanding aliases


def load_yaml(path: Path) -> tuple[Any, Lines]:
    """Load YAML safely; return the data and a map from field path to 1-based line number."""
    try:
        size = Path(path).stat().st_size
        if size > MAX_BYTES:
            raise SpecError(str(path), f"{size} bytes; a spec file is at most {MAX_BYTES} bytes (put data in "
                                       "the files it references)")
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(str(path), "file not found") from None
    except UnicodeDecodeError as exc:
        raise SpecError(str(path), f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)  # aliases share nodes: linear in the text
        if node is not None:
            _expanded_size(node, str(path))
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        raise SpecError(str(path), f"YAML syntax error: {exc.problem or exc}", line=line) from None
    except yaml.YAMLError as exc:
        raise SpecError(str(path), f"YAML error: {exc}") from None
    except RecursionError:
        raise SpecError(str(path), "YAML nested too deeply") from None
    escape = _SURROGATE_ESCAPE.search(text)
    # "\ud800" in double quotes; a \u pair too: YAML reads each escape alone
    if escape is not None and (cp := lone_surrogate_in(data)) is not None:
        at = re.search(rf"\\(?:u|U0000){cp:04x}", text, re.IGNORECASE) or escape
        raise SpecError(str(path), f"holds a surrogate (\\u{cp:04x}), which no UTF-8 text can hold: write the "
                        "character itself, or its 8-digit escape (\\U0001F600, not a \\u pair)",
                        line=text.count("\n", 0, at.start()) + 1)
    lines: Lines = {(): 1}
    if node is not None:
        _walk(node, (), lines, str(path))
    return data, lines


def _expanded_size(node: yaml.Node, path: str) -> int:
    """How many nodes the document holds once every alias is expanded; refuses past MAX_NODES or a cycle."""
    sizes: dict[int, int] = {}
    active: set[int] = set()

    def size(n: yaml.Node) -> int:
        key = id(n)
        if key in sizes:
            return sizes[key]
        if key in active:
            raise SpecError(path, "recursive YAML alias (an anchor used inside itself)", line=n.start_mark.line + 1)
        active.add(key)
        children = ([c for pair in n.value for c in pair] if isinstance(n, yaml.MappingNode)
                    else n.value if isinstance(n, yaml.SequenceNode) else [])
        total = 1
        for c in children:
            total += size(c)
            if total > MAX_NODES:
                raise SpecError(path, f"YAML aliases expand to more than {MAX_NODES} nodes (an alias bomb?); "
                                      "write the values out or put them in a referenced file",
                                line=n.start_mark.line + 1)
        active.discard(key)
        sizes[key] = total
        return total

    return size(node)


def _walk(node: yaml.Node, prefix: tuple, lines: Lines, path: str) -> None:
    if isinstance(node, yaml.MappingNode):
        seen: set = set()
        for key_node, value_node in node.value:
            key = key_node.value
            if key in seen:
                raise SpecError(path, "duplicate key", line=key_node.start_mark.line + 1,
                                field=".".join(map(str, prefix + (key,))))
            seen.add(key)
            lines[prefix + (key,)] = key_node.start_mark.line + 1
            _walk(value_node, prefix + (key,), lines, path)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            lines[prefix + (i,)] = item.start_mark.line + 1
            _walk(item, prefix + (i,), lines, path)


def line_for(lines: Lines, loc: tuple) -> int | None:
    """The line of the deepest known ancestor of loc (pydantic locations may point below YAML keys)."""
    loc = tuple(loc)
    while loc:
        if loc in lines:
            return lines[loc]
        loc = loc[:-1]
    return None


def raise_validation_error(path: Path, exc, lines: Lines, prefix: tuple = ()) -> None:
    """Turn a pydantic ValidationError into one SpecError naming file, line, field and expectation."""
    errors = exc.errors()
    err = errors[0]
    loc = prefix + tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
    field = ".".join(str(p) for p in loc) or None
    kind = err.get("type", "")
    if kind == "extra_forbidden":
        msg = "unknown key"
    elif kind == "missing":
        msg = "required field is missing"
    else:
        msg = err.get("msg", "invalid value")
        if "input" in err and kind not in ("model_type",) and not isinstance(err["input"], (dict, list)):
            msg += f" (found {err['input']!r})"
    more = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
    raise SpecError(str(path), msg + more, line=line_for(lines, loc), field=field) from None
