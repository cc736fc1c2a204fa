"""The row's JSON Schema, generated from its dataclass (bench.results.row.ResultRow): what a dashboard that loads
results.jsonl can rely on. Published as docs/row.schema.json and by `dtbench schema`; every field's type from its
annotation, the fields every row carries required, and fields a newer dtbench adds allowed (a row keeps them)."""
from __future__ import annotations

import dataclasses

from bench.results.row import REQUIRED, SCHEMA_VERSION, ResultRow

_TYPES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean", "dict": "object", "list": "array"}


def _json_type(annotation: str) -> list[str] | str:
    """`float | None` -> ["number", "null"]; `list[str]` -> "array"."""
    names = [part.strip().split("[")[0] for part in annotation.split("|")]
    types = [_TYPES.get(name, "null" if name == "None" else "object") for name in names]
    # An integer is a JSON number too: a float field may hold 3 (json.dumps writes 3.0 as 3.0, others may not).
    if "number" in types and "integer" not in types:
        types.append("integer")
    return types[0] if len(types) == 1 else types


def row_schema() -> dict:
    fields = [f for f in dataclasses.fields(ResultRow) if f.name != "unknown"]
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"dtbench result row (schema_version {SCHEMA_VERSION})",
        "description": "One line of results.jsonl: one run's figures and where they came from. Older rows migrate "
                       "to this version when dtbench loads them.",
        "type": "object",
        "properties": {f.name: {"type": _json_type(str(f.type))} for f in fields},
        "required": sorted(REQUIRED),
        "additionalProperties": True,
    }
