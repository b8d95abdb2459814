"""Deliveries a real upstream system sends, gated in real DAG runs: NUL bytes and non-finite numbers
become row failures with a reason (never a database crash), freshness is judged on the rows as a
whole, and a surplus field in the first data row is named like one in any later row."""

from __future__ import annotations

import copy
import csv
import io
import json
from datetime import date, timedelta
from pathlib import Path

import pytest

from tests.gate.conftest import SUPPLIER
from tests.gate.test_gate_dag import alerts, task_instance, xcom  # noqa: F401 - alerts is a fixture

WF = "supplier_exceptions"
HEADER, *ROWS = (SUPPLIER / "extract.csv").read_text(encoding="utf-8").splitlines()
FIELDS = HEADER.split(",")


def records() -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO("\n".join([HEADER, *ROWS]))))


def write_csv(path: Path, rows: list[dict[str, str]], tail: bytes = b"") -> Path:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=FIELDS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    path.write_bytes(out.getvalue().encode("utf-8") + tail)
    return path


def gate(path: Path, **params):  # type: ignore[no-untyped-def]
    from tests.dag_fixtures.gate_dags import gate_file_dag

    # dag.test() leaves a run's conf in its tasks' params: put the defaults back for the next test.
    saved = {task.task_id: copy.deepcopy(task.params) for task in gate_file_dag.tasks}
    try:
        return gate_file_dag.test(run_conf={"extract_path": str(path), **params})
    finally:
        for task in gate_file_dag.tasks:
            task.params = saved[task.task_id]


def quarantined(ledger, run) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {i.business_key: i.reason for i in ledger.items(workflow=WF, run_id=run.run_id, status="quarantined",
                                                           limit=None)}  # fmt: skip


# -- values jsonb cannot store -------------------------------------------------------------------


def test_a_nul_byte_in_a_field_quarantines_that_row_with_the_reason(tmp_path, airflow_db, ledger, alerts):  # noqa: F811
    rows = records()
    rows[5]["supplier_name"] = "Müller\x00 Verpackungen GmbH"

    run = gate(write_csv(tmp_path / "nul #1.csv", rows))

    assert run.state == "success", alerts()
    key = rows[5]["exception_id"]
    assert quarantined(ledger, run) == {key: "failed 1 check: supplier_name contains a NUL byte"}
    item = ledger.get(f"{WF}:{key}")
    assert item.payload["supplier_name"] == "Müller\u2400 Verpackungen GmbH"  # kept for the reviewer, shown as ␀
    assert ledger.count_by_status(workflow=WF, run_id=run.run_id) == {"validated": 479, "quarantined": 1}


def test_nul_padding_at_the_end_of_the_file_is_one_row_held_for_a_person(tmp_path, airflow_db, ledger, alerts):  # noqa: F811
    run = gate(write_csv(tmp_path / "padded.csv", records(), tail=b"\x00" * 512))

    assert run.state == "success", alerts()
    [(key, reason)] = quarantined(ledger, run).items()
    assert key.startswith("row-481@")
    assert reason.startswith("failed 10 checks: exception_id is NUL bytes only (padding at the end of the file?)")
    assert ledger.count_by_status(workflow=WF, run_id=run.run_id) == {"validated": 480, "quarantined": 1}


def test_nan_and_infinite_amounts_are_row_failures_in_csv(tmp_path, airflow_db, ledger, alerts):  # noqa: F811
    rows = records()
    for position, value in ((3, "NaN"), (4, "inf"), (6, "-Infinity"), (7, "1e309")):
        rows[position]["amount"] = value

    run = gate(write_csv(tmp_path / "amounts.csv", rows))

    assert run.state == "success", alerts()
    assert quarantined(ledger, run) == {
        rows[3]["exception_id"]: "failed 1 check: amount 'NaN' is not a finite number",
        rows[4]["exception_id"]: "failed 1 check: amount 'inf' is not a finite number",
        rows[6]["exception_id"]: "failed 1 check: amount '-Infinity' is not a finite number",
        rows[7]["exception_id"]: "failed 1 check: amount '1e309' is not a finite number",
    }


def test_nan_infinity_and_nul_in_json_lines_are_row_failures(tmp_path, airflow_db, ledger, alerts):  # noqa: F811
    lines = []
    for position, row in enumerate(records()):
        text = json.dumps({**row, "amount": float(row["amount"])}, ensure_ascii=False)
        if position == 3:
            text = text.replace(f'"amount": {float(row["amount"])}', '"amount": NaN')
        if position == 4:
            text = text.replace(f'"amount": {float(row["amount"])}', '"amount": -Infinity')
        if position == 6:
            text = text.replace('"notes": "', '"notes": "bad\\u0000')
        lines.append(text)
    path = tmp_path / "extract (eu).jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")

    run = gate(path)

    assert run.state == "success", alerts()
    rows = records()
    assert quarantined(ledger, run) == {
        rows[3]["exception_id"]: "failed 1 check: amount 'NaN' is not a finite number",
        rows[4]["exception_id"]: "failed 1 check: amount '-Infinity' is not a finite number",
        rows[6]["exception_id"]: "failed 1 check: notes contains a NUL byte",
    }


def test_an_infinite_number_in_parquet_is_a_row_failure(tmp_path, airflow_db, ledger, alerts):  # noqa: F811
    import pandas as pd

    frame = pd.read_csv(SUPPLIER / "extract.csv", dtype=str, keep_default_na=False)
    frame["amount"] = frame["amount"].astype(float)
    frame.loc[2, "amount"] = float("inf")
    path = tmp_path / "extract.parquet"
    frame.to_parquet(path)

    run = gate(path)

    assert run.state == "success", alerts()
    assert quarantined(ledger, run) == {frame.loc[2, "exception_id"]: (
        "failed 2 checks: amount is not a finite number (inf); amount inf is above the maximum 1,000,000"
    )}  # fmt: skip


# -- freshness of the delivery as a whole ------------------------------------------------------


def shifted(days: int) -> list[dict[str, str]]:
    """The sample extract, every date moved ``days`` into the past."""
    rows = records()
    for row in rows:
        row["exception_date"] = (date.fromisoformat(row["exception_date"]) - timedelta(days=days)).isoformat()
    return rows


def test_one_typo_date_in_2062_does_not_make_a_stale_extract_look_fresh(tmp_path, airflow_db, ledger, alerts):  # noqa: F811
    rows = shifted(33)  # newest 2026-10-25: a month-old extract
    rows[17]["exception_date"] = "2062-10-25"

    run = gate(write_csv(tmp_path / "stale with typo.csv", rows))

    assert run.state == "failed"
    assert task_instance(run, "gate") == ("failed", 1)  # a data fault: the retries are not used
    [alert] = alerts()
    assert alert["error"].startswith(
        "validation gate rejected the batch: "
        "stale data: the newest exception_date in stale with typo.csv is 2026-10-25, 36 days before the run "
        "date 2026-11-30; 99% of its 479 dated rows are from 2026-10-24 or earlier (37 days old, the median "
        "65 days), 0 within the allowed age (1 row(s) dated after the run date, e.g. 2062-10-25, were not "
        "counted); at most 30 days allowed (max_age)"
    )
    assert ledger.count_by_status(workflow=WF, run_id=run.run_id) == {}  # nothing went on to the AI step


def test_one_old_row_does_not_make_a_fresh_extract_stale(tmp_path, airflow_db, ledger, alerts):  # noqa: F811
    rows = records()
    rows[0]["exception_date"] = "2026-01-05"  # an old exception still open, within the suite's year

    run = gate(write_csv(tmp_path / "fresh.csv", rows), max_age_days=7)

    assert run.state == "success", alerts()
    assert ledger.count_by_status(workflow=WF, run_id=run.run_id) == {"validated": 480}


@pytest.mark.parametrize("line", [2, 52])
def test_a_surplus_field_is_named_with_its_line_also_in_the_first_data_row(
    tmp_path, airflow_db, ledger, alerts, line  # noqa: F811
):
    rows = (SUPPLIER / "extract.csv").read_text(encoding="utf-8").splitlines()
    rows[line - 1] = rows[line - 1].replace(",", ",Bergmann,", 1)  # "Bergmann, Stahlhandel" unquoted
    fields = next(csv.reader([rows[line - 1]]))
    assert len(fields) == 11  # an unquoted comma in a text field
    path = tmp_path / "comma.csv"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")

    run = gate(path)

    assert run.state == "failed"
    [alert] = alerts()
    assert alert["error"] == (
        f"validation gate rejected the batch: line {line} of comma.csv has 11 fields, the header has 10: "
        "probably a ',' inside an unquoted text field; the file cannot be read reliably, fix the export's quoting"
    )


def test_a_report_title_above_the_header_is_named_as_such(tmp_path, airflow_db, ledger, alerts):  # noqa: F811
    path = tmp_path / "titled.csv"
    path.write_text("\n".join(["Supplier exceptions - 3 Dec 2026", HEADER, *ROWS]) + "\n", encoding="utf-8")

    run = gate(path)

    assert run.state == "failed"
    [alert] = alerts()
    assert alert["error"] == (
        "validation gate rejected the batch: the first line of titled.csv is not the header: "
        "'Supplier exceptions - 3 Dec 2026' has 1 field, the next line has 10; remove the title line above the "
        "header (export the data without a title)"
    )
    assert ledger.count_by_status(workflow=WF, run_id=run.run_id) == {}  # nothing taken in from it
