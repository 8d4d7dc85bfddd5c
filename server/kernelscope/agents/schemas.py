"""Tool output schemas: the JSON Schema of the Structs each tool returns (what ``--json``
prints), with the root object inlined, as MCP wants an object at the top."""

from __future__ import annotations

from typing import Any

import msgspec


def output_schema(*types: type) -> dict[str, Any]:
    """The schema of one Struct type, or of a choice of them (``anyOf``), rooted at an
    object; shared definitions stay under ``$defs``."""
    found, defs = msgspec.json.schema_components(types, ref_template="#/$defs/{name}")
    schemas: list[dict[str, Any]] = list(found)
    if len(schemas) > 1:
        return {"type": "object", "anyOf": schemas, "$defs": defs}
    name = str(schemas[0]["$ref"]).rpartition("/")[2]
    root: dict[str, Any] = {**defs[name]}
    if len(defs) > 1:
        root["$defs"] = defs
    return root
