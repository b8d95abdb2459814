"""Batch-level failures: the whole input is refused, recorded as quarantined, and no item is written."""

from __future__ import annotations

from datetime import timedelta

import pytest

from conveyor.gate.errors import BatchRejected
from tests.gate.conftest import MALFORMED, SUPPLIER, run_gate

# (file, extra settings, kind, phrases the message must contain)
CASES = [
    (
        "renamed_column.csv",
        {},
        "missing_columns",
        ["column 'supplier_id' missing; found 'vendor_id' (similar)", "'SUP-", "renamed upstream"],
    ),
    (
        "missing_column.csv",
        {},
        "missing_columns",
        ["column 'po_number' missing", "Columns found: exception_id"],
    ),
    ("empty.csv", {}, "empty", ["empty (0 bytes)", "empty.csv", "never a success"]),
    ("header_only.csv", {}, "empty", ["no data rows", "header (10 columns)", "never a success"]),
    ("wrong_delimiter.csv", {}, "delimiter", ["';'-delimited", "10 columns", "re-export it comma-separated"]),
    (
        "non_utf8.csv",
        {},
        "encoding",
        ["not valid UTF-8", "byte 0xfc at line 7", "Müller", "re-export the file as UTF-8"],
    ),
    (
        "date_format.csv",
        {},
        "exception_rate",
        [
            "100.0% of rows failed the gate (480 of 480)",
            "at most 10.0% allowed (max_exception_rate)",
            "exception_date '29/09/2026' is not a date in the form YYYY-MM-DD",
            "look like DD/MM/YYYY",
            "Nothing was routed",
        ],
    ),
    (
        "stale.csv",
        {"max_age": timedelta(days=7)},
        "stale",
        [
            "stale data: the newest exception_date in stale.csv is 2026-10-28",
            "33 days before the run date 2026-11-30",
            "at most 7 days allowed (max_age)",
        ],
    ),
    (
        "truncated.csv",
        {"min_rows": 100},
        "row_count",
        ["only 12 rows in truncated.csv; at least 100 expected (min_rows)"],
    ),
    (
        "ragged_rows.csv",
        {},
        "unreadable",
        ["line 59 of ragged_rows.csv has 11 fields, the header has 10", "quoting"],
    ),
]


@pytest.mark.parametrize(("name", "settings", "kind", "phrases"), CASES, ids=[c[0] for c in CASES])
def test_batch_failure_is_named_recorded_and_writes_no_item(ledger, name, settings, kind, phrases):
    with pytest.raises(BatchRejected) as caught:
        run_gate(ledger, MALFORMED / name, **settings)

    assert caught.value.kind == kind
    for phrase in phrases:
        assert phrase in caught.value.reason, caught.value.reason
    batch = ledger.get_batch("supplier_exceptions", "run-1", "gate")
    assert batch["status"] == "quarantined"
    assert batch["reason"] == caught.value.reason
    assert batch["detail"]["kind"] == kind
    assert batch["source"].endswith(name)
    assert batch["input_hash"] and len(batch["input_hash"]) == 64
    assert ledger.count_by_status() == {}


def test_exception_rate_bound_is_the_operators_setting(ledger):
    """4 bad amounts in 480 rows is 0.8%: accepted under 10%, refused under 0.5%."""
    with pytest.raises(BatchRejected) as caught:
        run_gate(ledger, MALFORMED / "bad_amounts.csv", max_exception_rate=0.005)

    assert caught.value.kind == "exception_rate"
    assert "0.8% of rows failed the gate (4 of 480); at most 0.5% allowed" in caught.value.reason
    assert "amount" in caught.value.reason
    batch = ledger.get_batch("supplier_exceptions", "run-1", "gate")
    assert batch["status"] == "quarantined"
    failed = {e["column"]: e["failed"] for e in batch["detail"]["expectations"] if e["failed"]}
    assert failed == {"amount": 4}
    assert ledger.count_by_status() == {}


def test_missing_file_is_a_batch_failure(ledger):
    with pytest.raises(BatchRejected) as caught:
        run_gate(ledger, SUPPLIER / "no_such_extract.csv")

    assert caught.value.kind == "not_found"
    assert "input file not found" in caught.value.reason
    assert ledger.get_batch("supplier_exceptions", "run-1", "gate")["status"] == "quarantined"


def test_unknown_extension_is_refused_with_the_formats_it_takes(ledger, tmp_path):
    path = tmp_path / "extract.xlsx"
    path.write_bytes(b"PK\x03\x04")

    with pytest.raises(BatchRejected, match=r"use \.csv, \.jsonl or \.parquet"):
        run_gate(ledger, path)
    batch = ledger.get_batch("supplier_exceptions", "run-1", "gate")
    assert (batch["status"], batch["detail"]["kind"], batch["source"]) == (
        "quarantined",
        "unreadable",
        str(path),
    )


def test_a_fixed_file_for_the_same_run_is_accepted_after_a_rejection(ledger):
    """A rejected batch wrote no item, so the corrected extract can go through the same run."""
    with pytest.raises(BatchRejected):
        run_gate(ledger, MALFORMED / "renamed_column.csv")

    summary = run_gate(ledger, SUPPLIER / "extract.csv")

    assert summary.validated == 480
    batch = ledger.get_batch("supplier_exceptions", "run-1", "gate")
    assert batch["status"] == "accepted"
    assert batch["input_hash"] == summary.input_hash


def test_freshness_passes_within_max_age(ledger):
    summary = run_gate(ledger, SUPPLIER / "extract.csv", max_age=timedelta(days=7))

    assert summary.validated == 480


def test_invalid_json_line_is_named(ledger, tmp_path):
    good = (SUPPLIER / "extract.jsonl").read_text(encoding="utf-8").splitlines()
    good[4] = good[4][:-1]  # a truncated record
    path = tmp_path / "extract.jsonl"
    path.write_text("\n".join(good) + "\n", encoding="utf-8")

    with pytest.raises(BatchRejected, match=r"line 5 of extract.jsonl is not valid JSON"):
        run_gate(ledger, path)
    assert ledger.get_batch("supplier_exceptions", "run-1", "gate")["detail"]["line"] == 5
