"""The server catalog: every registered server, tool, parameter and failure reason, as markdown.

``prove servers catalog --out docs/catalog.md`` writes it; a test regenerates it and fails when
the committed file differs, so the catalog cannot drift from the code.
"""

from __future__ import annotations

from typing import Any

from prove_core.toolkit.server import ENTITY_KEY, Server, ToolSpec


def _type(prop: dict[str, Any]) -> str:
    if "enum" in prop:
        return " \\| ".join(f"`{v}`" for v in prop["enum"])
    kind = prop.get("type", "any")
    if kind == "array":
        return f"array of {_type(prop.get('items', {}))}"
    if ENTITY_KEY in prop:
        return f"{kind} ({prop[ENTITY_KEY]} id)"
    return str(kind)


def _bounds(prop: dict[str, Any]) -> str:
    parts = []
    for key, label in (("minimum", ">="), ("exclusiveMinimum", ">"), ("maximum", "<="), ("exclusiveMaximum", "<"),
                       ("minLength", "min length"), ("maxLength", "max length"), ("minItems", "min items"),
                       ("maxItems", "max items")):
        if key in prop:
            parts.append(f"{label} {prop[key]}")
    if "default" in prop:
        parts.append(f"default `{prop['default']}`")
    return ", ".join(parts)


def _kind(spec: ToolSpec) -> str:
    a = spec.annotations
    flags = ["read-only" if a.read_only else ("destructive" if a.destructive else "write")]
    if a.idempotent and not a.read_only:
        flags.append("idempotent")
    return ", ".join(flags)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def server_section(server: Server) -> list[str]:
    lines = [f"## {server.name}", "", f"Domain **{server.domain}** — {len(server.tools)} tools. {_cell(server.description)}", ""]
    for spec in server.specs():
        lines += [f"### `{server.name}.{spec.name}` ({_kind(spec)})", "", _cell(spec.description), ""]
        props = spec.parameters.get("properties", {})
        required = set(spec.parameters.get("required", []))
        if props:
            lines += ["| parameter | type | required | constraints | description |", "| --- | --- | --- | --- | --- |"]
            for name, prop in props.items():
                lines.append(f"| `{name}` | {_cell(_type(prop))} | {'yes' if name in required else 'no'} | "
                             f"{_cell(_bounds(prop))} | {_cell(str(prop.get('description', '')))} |")
            lines.append("")
        meta = []
        for label, values in (("reads", spec.reads), ("produces", spec.produces), ("mutates", spec.mutates)):
            if values:
                meta.append(f"{label} {', '.join(values)}")
        if meta:
            lines += ["Entities: " + "; ".join(meta) + ".", ""]
        if spec.errors:
            lines += ["Fails with: " + ", ".join(f"`{e}`" for e in spec.errors) + ".", ""]
    return lines


def render(servers: list[Server]) -> str:
    total = sum(len(s.tools) for s in servers)
    lines = [
        "# Server catalog",
        "",
        "Generated from the plugin registry by `prove servers catalog --out docs/catalog.md`; a test",
        "fails when this file is out of date. Every tool with its parameters, the entity types it",
        "reads, produces and mutates, and the typed failure reasons it can return.",
        "",
        f"{len(servers)} servers, {total} tools.",
        "",
        "| server | domain | tools | failure reasons |",
        "| --- | --- | --- | --- |",
    ]
    for s in servers:
        reasons = {r for spec in s.specs() for r in spec.errors}
        lines.append(f"| [{s.name}](#{s.name}) | {s.domain} | {len(s.tools)} | {len(reasons)} |")
    lines.append("")
    for s in servers:
        lines += server_section(s)
    return "\n".join(lines).rstrip() + "\n"
