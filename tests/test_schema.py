"""The row's published JSON Schema: generated from the row's dataclass, the same as docs/row.schema.json and
`bench schema`, and every committed results folder's rows valid against it (as dtbench loads them: migrated)."""
import json

import pytest

from bench.results.row import ResultRow
from bench.results.schema import row_schema
from helpers import REPO, cli

jsonschema = pytest.importorskip("jsonschema")


def test_the_published_schema_is_the_one_the_row_generates_and_bench_schema_prints_it():
    assert json.loads((REPO / "docs" / "row.schema.json").read_text()) == row_schema(), \
        "docs/row.schema.json is stale: python -m bench schema > docs/row.schema.json"
    printed = cli("schema")
    assert printed.returncode == 0 and json.loads(printed.stdout) == row_schema()


def test_every_committed_row_is_valid_and_a_wrong_type_is_not():
    validator = jsonschema.Draft202012Validator(row_schema())
    folders = sorted(p.parent for p in (REPO / "results").glob("**/results.jsonl"))
    assert len(folders) >= 20
    for path in (folder / "results.jsonl" for folder in folders):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            row = ResultRow.from_dict(json.loads(line)).to_dict()
            errors = [e.message for e in validator.iter_errors(row)]
            assert not errors, f"{path.relative_to(REPO)} line {number}: {errors[:3]}"
    assert not validator.is_valid({**row, "world_size": "two"})
    assert not validator.is_valid({k: v for k, v in row.items() if k != "variant"})
