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


# -- a delivery that is not what it claims to be -----------------------------------------------


def rejected(run, alerts, ledger) -> str:  # type: ignore[no-untyped-def]  # noqa: F811
    """The one alert of a run whose gate refused the whole delivery (no retry, nothing taken in)."""
    assert run.state == "failed"
    assert task_instance(run, "gate") == ("failed", 1)  # a data fault: the retries are not used
    [alert] = alerts()
    assert ledger.count_by_status(workflow=WF, run_id=run.run_id) == {}
    prefix = "validation gate rejected the batch: "
    assert alert["error"].startswith(prefix)
    return str(alert["error"][len(prefix):])


def test_nul_padding_at_the_end_of_the_file_is_a_damaged_delivery(tmp_path, airflow_db, ledger, alerts):  # noqa: F811
    run = gate(write_csv(tmp_path / "padded.csv", records(), tail=b"\x00" * 512))

    assert rejected(run, alerts, ledger) == (
        "padded.csv ends in 512 NUL byte(s) after line 481: the transfer was cut short or padded, so the file "
        "is damaged; ask the sender for the file again (no row of it was processed)"
    )


def xlsx_bytes() -> bytes:
    """A workbook's parts as Excel zips them (the gate only has to recognise it, not read it)."""
    import zipfile

    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as book:
        book.writestr("[Content_Types].xml", '<?xml version="1.0"?><Types/>')
        book.writestr("xl/workbook.xml", '<?xml version="1.0"?><workbook><sheets/></workbook>')
        book.writestr("xl/worksheets/sheet1.xml", f"<worksheet><c>{HEADER}</c></worksheet>")
    return out.getvalue()


def parquet_bytes() -> bytes:
    import pandas as pd

    out = io.BytesIO()
    pd.read_csv(SUPPLIER / "extract.csv", dtype=str).to_parquet(out)
    return out.getvalue()


@pytest.mark.parametrize(("made", "reason"), [
    ("gzip", "extract.csv is gzip-compressed, not CSV text; deliver it uncompressed (the export compressed it but kept "
             "the name)"),
    ("xlsx", "extract.csv is an Excel workbook (.xlsx), not CSV text; save the sheet as 'CSV UTF-8' in the "
             "export instead"),
    ("parquet", "extract.csv is a Parquet file, not CSV text; deliver the export itself, or name the file for "
                "what it is"),
])  # fmt: skip
def test_another_format_under_a_csv_name_is_named(tmp_path, airflow_db, ledger, alerts, made, reason):  # noqa: F811
    import gzip

    text = (SUPPLIER / "extract.csv").read_bytes()
    body = {"gzip": lambda: gzip.compress(text), "xlsx": xlsx_bytes, "parquet": parquet_bytes}[made]()
    path = tmp_path / "extract.csv"
    path.write_bytes(body)

    assert rejected(gate(path), alerts, ledger) == reason


def test_a_file_still_being_written_is_not_gated_as_a_short_last_row(tmp_path, airflow_db, ledger, alerts):  # noqa: F811
    text = "\n".join([HEADER, *ROWS])
    cut = text[: text.rindex(",", 0, text.rindex("\n") + 40)]  # the writer stopped inside row 480
    path = tmp_path / "writing.csv"
    path.write_text(cut, encoding="utf-8")
    fields = len(next(csv.reader([cut.rsplit("\n", 1)[1]])))
    assert 1 < fields < len(FIELDS)

    assert rejected(gate(path), alerts, ledger) == (
        f"the last line of writing.csv (line 481) stops after {fields} of the header's 10 fields, with no line "
        "end: the file is still being written or was cut short; clear the task once the export has finished, "
        "or ask the sender for the whole file"
    )


def test_a_last_line_without_a_line_end_is_fine_when_it_is_whole(tmp_path, airflow_db, ledger, alerts):  # noqa: F811
    path = tmp_path / "no final newline.csv"
    path.write_text("\n".join([HEADER, *ROWS]), encoding="utf-8")

    run = gate(path)

    assert run.state == "success", alerts()
    assert ledger.count_by_status(workflow=WF, run_id=run.run_id) == {"validated": 480}


def test_two_exports_joined_into_one_file_are_named(tmp_path, airflow_db, ledger, alerts):  # noqa: F811
    path = tmp_path / "joined.csv"
    path.write_text("\n".join([HEADER, *ROWS[:240], HEADER, *ROWS[240:]]) + "\n", encoding="utf-8")

    assert rejected(gate(path), alerts, ledger) == (
        "data row 241 of joined.csv repeats the header line: two exports were joined into one file, or a paged "
        "report repeats its header; deliver each export as a file of its own"
    )


def test_a_semicolon_export_with_a_bom_and_comma_decimals_is_named_for_its_delimiter(
    tmp_path, airflow_db, ledger, alerts  # noqa: F811
):
    rows = [next(csv.reader([line])) for line in [HEADER, *ROWS]]
    amount = FIELDS.index("amount")
    for row in rows[1:]:
        row[amount] = row[amount].replace(".", ",")  # the decimal comma that comes with ';' exports
    out = io.StringIO()
    csv.writer(out, delimiter=";", lineterminator="\r\n").writerows(rows)
    path = tmp_path / "excel export.csv"
    path.write_bytes(b"\xef\xbb\xbf" + out.getvalue().encode("utf-8"))

    assert rejected(gate(path), alerts, ledger) == (
        "excel export.csv is ';'-delimited: its header splits into 10 columns on ';' "
        f"({', '.join(FIELDS[:4])}, …) but is one column when read with ','; re-export it comma-separated"
    )


def test_an_amount_spelled_with_a_decimal_comma_and_a_trailing_minus_is_held_naming_the_spelling(
    tmp_path, airflow_db, ledger, alerts  # noqa: F811
):
    rows = records()
    rows[3]["amount"] = "1.234,56-"
    rows[8]["amount"] = "R$ 1.936,40"

    run = gate(write_csv(tmp_path / "amounts.csv", rows))

    assert run.state == "success", alerts()
    assert quarantined(ledger, run) == {
        rows[3]["exception_id"]: "failed 1 check: amount '1.234,56-' is not a number (written with ',' for "
        "decimals, '.' between thousands and a trailing minus; the feed must send plain numbers such as -1234.56)",
        rows[8]["exception_id"]: "failed 1 check: amount 'R$ 1.936,40' is not a number (written with a currency "
        "sign and ',' for decimals, '.' between thousands; the feed must send plain numbers such as -1234.56)",
    }


def test_a_whole_column_of_decimal_commas_fails_the_batch_naming_the_column(tmp_path, airflow_db, ledger, alerts):  # noqa: F811
    rows = records()
    for row in rows:
        row["amount"] = row["amount"].replace(".", ",")

    reason = rejected(gate(write_csv(tmp_path / "decimal comma.csv", rows)), alerts, ledger)

    assert reason == (
        "100.0% of rows failed the gate (480 of 480); at most 10.0% allowed (max_exception_rate). Most frequent: "
        f"amount {rows[0]['amount']!r} is not a number (written with ',' for decimals; the feed must send plain "
        "numbers such as -1234.56) (480 rows). Nothing was routed: fix the input and clear this task"
    )
