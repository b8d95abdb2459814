"""Re-running the gate: same input changes nothing, other input is refused, a half-done run completes."""

from __future__ import annotations

import shutil

import pytest

from conveyor.gate.errors import InputChanged, RepeatedInput
from tests.gate.conftest import MALFORMED, SUPPLIER, run_gate, snapshot, transitions_count

WORKFLOW = "supplier_exceptions"


def test_same_run_same_file_changes_nothing(ledger):
    first = run_gate(ledger, MALFORMED / "bad_amounts.csv")
    before = snapshot(ledger)

    again = run_gate(ledger, MALFORMED / "bad_amounts.csv")

    assert snapshot(ledger) == before
    assert again.rerun is True
    assert {**again.as_xcom(), "rerun": False} == first.as_xcom()


def test_same_run_changed_file_is_refused_and_the_batch_record_kept(ledger, tmp_path):
    path = tmp_path / "extract.csv"
    shutil.copy(SUPPLIER / "extract.csv", path)
    first = run_gate(ledger, path)
    before = snapshot(ledger)
    path.write_bytes((MALFORMED / "bad_amounts.csv").read_bytes())

    with pytest.raises(InputChanged) as caught:
        run_gate(ledger, path)

    reason = caught.value.reason
    assert "input changed for run 'run-1'" in reason
    assert f"sha256 {first.input_hash[:12]}" in reason
    assert "trigger a new run for the new file" in reason
    assert snapshot(ledger) == before
    assert ledger.get_batch(WORKFLOW, "run-1", "gate")["input_hash"] == first.input_hash


def test_an_attempt_that_died_half_way_is_completed_without_duplicates(ledger):
    """The batch is recorded (with its hash) before items are written; a later attempt finishes."""
    run_gate(ledger, MALFORMED / "bad_amounts.csv")
    moved_before = transitions_count(ledger)
    with ledger.connect() as conn:
        # What a worker killed during routing leaves behind: an incomplete batch record and
        # items of the second half still 'received'.
        conn.execute("UPDATE conveyor.batches SET detail = jsonb_set(detail, '{complete}', 'false')")
        conn.execute(
            "DELETE FROM conveyor.transitions WHERE to_status <> 'received' AND item_id > %s",
            ("supplier_exceptions:EX-2026-000240",),
        )
        conn.execute(
            "UPDATE conveyor.items SET status = 'received', reason = NULL, last_error = NULL"
            " WHERE item_id > %s",
            ("supplier_exceptions:EX-2026-000240",),
        )
    assert ledger.count_by_status()["received"] == 240

    summary = run_gate(ledger, MALFORMED / "bad_amounts.csv")

    assert summary.rerun is False
    assert (summary.validated, summary.quarantined) == (476, 4)
    assert ledger.count_by_status() == {"validated": 476, "quarantined": 4}
    assert transitions_count(ledger) == moved_before
    assert ledger.get_batch(WORKFLOW, "run-1", "gate")["detail"]["complete"] is True


def test_another_run_may_gate_a_new_file(ledger):
    run_gate(ledger, SUPPLIER / "extract.csv", run_id="monday")

    summary = run_gate(ledger, MALFORMED / "extra_columns.csv", run_id="tuesday")

    # Same exception ids with an extra column: other data for keys Monday's run holds.
    assert summary.conflicts == 480
    assert ledger.count_by_status(run_id="monday") == {"validated": 480}


def test_the_same_file_delivered_again_for_another_run_is_named_at_the_gate(ledger, tmp_path):
    first = run_gate(ledger, SUPPLIER / "extract.csv", run_id="monday")
    resent = tmp_path / "extract_tuesday.csv"
    shutil.copy(SUPPLIER / "extract.csv", resent)
    before = snapshot(ledger)

    with pytest.raises(RepeatedInput) as caught:
        run_gate(ledger, resent, run_id="tuesday")

    reason = caught.value.reason
    assert "extract_tuesday.csv was already gated in run 'monday'" in reason
    assert f"sha256 {first.input_hash[:12]}" in reason and f"{first.rows} rows" in reason
    after = snapshot(ledger)
    assert (after["items"], after["transitions"]) == (before["items"], before["transitions"])  # nothing moved
    assert ledger.get_batch(WORKFLOW, "tuesday", "gate")["status"] == "repeated"
