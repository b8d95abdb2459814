"""A supplier extract snapshotted and gated in real DAG runs, on a local folder and on S3: a file
name with spaces, '#', '%', parentheses and accents is found; a missing one fails once naming it."""

from __future__ import annotations

import pytest

from tests.gate.conftest import SUPPLIER
from tests.gate.test_gate_dag import task_instance, xcom

WF = "supplier_exceptions"
FEED = "feeds (eu) #1/extract #3 (final) 100% é.csv"


@pytest.mark.parametrize("named_by", ["relative", "absolute"])
def test_an_extract_with_odd_characters_in_its_name_is_snapshotted_and_gated(
    place, named_by, airflow_db, ledger, alerts
):
    from tests.dag_fixtures.intake_dags import extract_dag

    place.put(FEED, (SUPPLIER / "extract.csv").read_bytes())
    source = FEED if named_by == "relative" else str(place.root / FEED) if place.root else place.url(FEED)

    run = extract_dag.test(run_conf={"extract_path": source})

    assert run.state == "success", alerts()
    snapshot = xcom(run, "snapshot")
    assert snapshot.startswith(place.kind) and snapshot.endswith("/extract #3 (final) 100% é.csv")
    summary = xcom(run, "gate")
    assert (summary["rows"], summary["validated"], summary["quarantined"]) == (480, 480, 0)
    assert ledger.count_by_status(workflow=WF, run_id=run.run_id) == {"validated": 480}


def test_a_missing_extract_fails_once_naming_where_it_was_expected(place, airflow_db, ledger, alerts):
    from tests.dag_fixtures.intake_dags import extract_dag

    place.put("feeds (eu) #1/extract #2.csv", (SUPPLIER / "extract.csv").read_bytes())  # yesterday's, not today's

    run = extract_dag.test(run_conf={"extract_path": FEED})

    assert run.state == "failed"
    assert task_instance(run, "snapshot") == ("failed", 1)  # not retried: the feed delivered nothing
    [alert] = alerts()
    assert alert["error"] == f"extract not found: {place.url(FEED)} (the feed delivered no file there)"
    assert ledger.count_by_status(workflow=WF, run_id=run.run_id) == {}


@pytest.mark.parametrize("damage", ["gzip", "nul padding"])
def test_a_damaged_delivery_is_named_on_a_folder_and_on_s3(place, damage, airflow_db, ledger, alerts):
    import gzip

    text = (SUPPLIER / "extract.csv").read_bytes()
    place.put(FEED, gzip.compress(text) if damage == "gzip" else text + b"\x00" * 4096)
    from tests.dag_fixtures.intake_dags import extract_dag

    run = extract_dag.test(run_conf={"extract_path": FEED})

    assert run.state == "failed"
    assert task_instance(run, "gate") == ("failed", 1)
    [alert] = alerts()
    name = "extract #3 (final) 100% é.csv"
    assert alert["error"] == "validation gate rejected the batch: " + (
        f"{name} is gzip-compressed, not CSV text; deliver it uncompressed (the export compressed it but kept the name)"
        if damage == "gzip"
        else f"{name} ends in 4,096 NUL byte(s) after line 481: the transfer was cut short or padded, so the file "
        "is damaged; ask the sender for the file again (no row of it was processed)"
    )
    assert ledger.count_by_status(workflow=WF, run_id=run.run_id) == {}
