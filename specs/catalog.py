"""Rendering the precision-tool catalog into prompt text."""

from __future__ import annotations

import json

from mashbill.specs.model import ToolCatalogFile


def _signature(schema: dict) -> str:
    props = schema.get("properties", {})
    required = set(schema.get("required", []))
    parts = []
    for name, prop in props.items():
        typ = prop.get("type", "any")
        if "enum" in prop:
            typ = "|".join(str(e) for e in prop["enum"])
        parts.append(f"{name}: {typ}" + ("" if name in required else "?"))
    return ", ".join(parts)


def render_catalog(catalog: ToolCatalogFile) -> str:
    groups: dict[str, list[str]] = {}
    for name, tool in catalog.tools.items():
        example = json.dumps(tool.example, ensure_ascii=False)
        groups.setdefault(tool.group, []).append(
            f"- {name}({_signature(tool.args)}): {tool.description} Example mcp_args: {example}"
        )
    return "\n".join(f"[{group}]\n" + "\n".join(lines) for group, lines in groups.items())
