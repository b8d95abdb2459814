"""Expectation suites as JSON under include/expectations: loading, errors, parameters."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime

import pytest

from conveyor.gate.errors import SuiteError
from conveyor.gate.suites import load_suite
from tests.gate.conftest import REPO


def test_bundled_suites_load_and_build_in_great_expectations():
    for name in ("supplier_exceptions", "invoice_fields"):
        suite = load_suite(name)
        built = suite.gx_suite()
        assert len(built.expectations) == len(suite.expectations)
        assert suite.key_column in suite.columns


def test_unknown_suite_names_the_folder_and_the_suites_in_it():
    with pytest.raises(SuiteError) as caught:
        load_suite("supplier_exeptions")
    assert "expectation suite 'supplier_exeptions' not found" in str(caught.value)
    assert "supplier_exceptions" in str(caught.value) and "invoice_fields" in str(caught.value)


def test_include_folder_comes_from_the_conveyor_config_section(tmp_path, monkeypatch):
    (tmp_path / "expectations").mkdir()
    (tmp_path / "expectations" / "tiny.json").write_text(
        json.dumps(
            {
                "name": "tiny",
                "meta": {"conveyor": {"key_column": "id", "columns": {"id": "string", "qty": "integer"}}},
                "expectations": [{"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "id"}}],
            }
        )
    )
    monkeypatch.setenv("AIRFLOW__CONVEYOR__INCLUDE_FOLDER", str(tmp_path))

    suite = load_suite("tiny")

    assert suite.required_columns == ("id", "qty")
    assert suite.columns["qty"].kind == "integer"



def test_a_suite_next_to_the_dag_file_wins_over_the_include_folder(tmp_path):
    from conveyor.include import searching_near

    dag_folder = tmp_path / "my_project_dags"
    dag_folder.mkdir()
    (dag_folder / "supplier_exceptions.json").write_text(json.dumps({
        "name": "mine",
        "meta": {"conveyor": {"key_column": "id", "columns": {"id": "string"}}},
        "expectations": [{"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "id"}}],
    }))
    with searching_near(dag_folder):
        assert load_suite("supplier_exceptions").name == "mine"
    assert load_suite("supplier_exceptions").name == "supplier_exceptions"  # the include folder's

def test_a_bad_expectation_is_named_by_position(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(
        json.dumps(
            {
                "name": "bad",
                "meta": {"conveyor": {"columns": {"id": "string"}}},
                "expectations": [
                    {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "id"}},
                    {"type": "expect_column_values_to_be_purple", "kwargs": {"column": "id"}},
                ],
            }
        )
    )

    suite = load_suite(str(path))
    with pytest.raises(
        SuiteError, match=r"expectation #2 \('expect_column_values_to_be_purple'\) is not valid"
    ):
        suite.gx_suite()


@pytest.mark.parametrize(
    ("meta", "message"),
    [
        ({"columns": {"id": "money"}}, "column 'id' has unknown type 'money'"),
        (
            {"columns": {"id": "string"}, "key_column": "key"},
            "key_column 'key' is not among its declared columns",
        ),
        ({"columns": {"id": "string"}, "freshness_column": "id"}, "must be a date or datetime column"),
    ],
)
def test_bad_reading_instructions_are_refused(tmp_path, meta, message):
    path = tmp_path / "suite.json"
    path.write_text(
        json.dumps(
            {
                "name": "s",
                "meta": {"conveyor": meta},
                "expectations": [{"type": "expect_column_to_exist", "kwargs": {"column": "id"}}],
            }
        )
    )
    with pytest.raises(SuiteError, match=message):
        load_suite(str(path))


def test_parameters_are_resolved_for_the_run_date():
    suite = load_suite("invoice_fields")

    values = suite.resolve_parameters(datetime(2026, 11, 30, 23, 30, tzinfo=UTC))

    assert str(values["oldest_invoice_date"]) == "2025-11-30 00:00:00"
    assert str(values["newest_invoice_date"]) == "2026-12-01 00:00:00"
    assert values["known_vendor_ids"][:2] == ["V-1001", "V-1002"] and len(values["known_vendor_ids"]) == 11


def test_missing_parameter_value_is_named(tmp_path):
    path = tmp_path / "suite.json"
    path.write_text(
        json.dumps(
            {
                "name": "s",
                "meta": {"conveyor": {"columns": {"n": "number"}}},
                "expectations": [
                    {
                        "type": "expect_column_values_to_be_between",
                        "kwargs": {"column": "n", "max_value": {"$PARAMETER": "cap"}},
                    },
                ],
            }
        )
    )
    suite = load_suite(str(path))

    with pytest.raises(SuiteError, match=r"no value for \$PARAMETER cap"):
        suite.resolve_parameters(datetime(2026, 11, 30, tzinfo=UTC))
    assert suite.resolve_parameters(datetime(2026, 11, 30, tzinfo=UTC), {"cap": 5}) == {"cap": 5}


def test_importing_the_operator_does_not_import_pandas_or_great_expectations():
    code = (
        "import sys; import conveyor.gate.operators, conveyor.gate; "
        "heavy = [m for m in ('pandas', 'great_expectations', 'pyarrow') if m in sys.modules]; "
        "print(','.join(heavy))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1:] in ([], [""])


@pytest.mark.parametrize(
    ("extra", "kind", "phrase"),
    [
        (
            {
                "type": "expect_column_values_to_be_between",
                "kwargs": {"column": "supplier_name", "min_value": 0},
            },
            "suite_error",
            "expectation expect_column_values_to_be_between on supplier_name could not run",
        ),
        (
            {"type": "expect_table_row_count_to_be_between", "kwargs": {"min_value": 1000}},
            "suite_table_check",
            "table check expect_table_row_count_to_be_between failed (observed 480)",
        ),
    ],
    ids=["expectation-cannot-run", "table-level-expectation"],
)
def test_suite_problems_found_while_validating_reject_the_batch(ledger, tmp_path, extra, kind, phrase):
    from conveyor.gate.errors import BatchRejected
    from tests.gate.conftest import SUPPLIER, run_gate

    raw = json.loads((REPO / "include" / "expectations" / "supplier_exceptions.json").read_text())
    raw["expectations"].append(extra)
    path = tmp_path / "suite.json"
    path.write_text(json.dumps(raw))

    with pytest.raises(BatchRejected) as caught:
        run_gate(ledger, SUPPLIER / "extract.csv", suite=str(path))

    assert caught.value.kind == kind
    assert phrase in caught.value.reason
    assert ledger.get_batch("supplier_exceptions", "run-1", "gate")["status"] == "quarantined"
    assert ledger.count_by_status() == {}
