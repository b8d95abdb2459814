"""A SQL query as the gate's input: the rows of a real Postgres table, through an Airflow connection URI."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from conveyor.gate.errors import BatchRejected
from tests.conftest import LEDGER_DB
from tests.gate.conftest import SUPPLIER, run_gate
from tests.support import postgres

WORKFLOW = "supplier_exceptions"


@pytest.fixture
def source_table(ledger, monkeypatch) -> Iterator[str]:
    """The good extract loaded into a typed table, reachable as Airflow connection 'gate_source'."""
    monkeypatch.setenv("AIRFLOW_CONN_GATE_SOURCE", postgres.airflow_conn_uri_for(LEDGER_DB))
    with psycopg.connect(ledger.dsn, autocommit=True) as conn:
        conn.execute("DROP SCHEMA IF EXISTS gate_src CASCADE")
        conn.execute("CREATE SCHEMA gate_src")
        conn.execute(
            "CREATE TABLE gate_src.exceptions (exception_id text PRIMARY KEY, supplier_id text,"
            " supplier_name text, po_number text, exception_date date, amount numeric(14, 2), currency text,"
            " quantity_ordered integer, quantity_received integer, notes text)"
        )
        with conn.cursor().copy("COPY gate_src.exceptions FROM STDIN WITH (FORMAT csv, HEADER true)") as copy:
            copy.write((SUPPLIER / "extract.csv").read_bytes())
    yield "gate_src.exceptions"
    with psycopg.connect(ledger.dsn, autocommit=True) as conn:
        conn.execute("DROP SCHEMA IF EXISTS gate_src CASCADE")


def test_query_rows_become_the_same_items_as_the_csv_export(ledger, source_table):
    summary = run_gate(
        ledger,
        None,
        sql=f"SELECT * FROM {source_table} ORDER BY exception_id",
        conn_id="gate_source",
        run_id="from-sql",
    )

    assert (summary.rows, summary.validated, summary.quarantined) == (480, 480, 0)
    assert summary.source.startswith("sql[gate_source]: SELECT * FROM gate_src.exceptions")
    from_sql = {i.item_id: i.payload for i in ledger.items(workflow=WORKFLOW, limit=None)}
    with ledger.connect() as conn:
        conn.execute(
            "TRUNCATE conveyor.item_states, conveyor.item_bodies, conveyor.transitions, conveyor.batches,"
            " conveyor.gate_results"
        )
    run_gate(ledger, SUPPLIER / "extract.csv", run_id="from-csv")
    from_csv = {i.item_id: i.payload for i in ledger.items(workflow=WORKFLOW, limit=None)}
    assert from_sql == from_csv


def test_query_with_a_renamed_column_is_a_batch_failure(ledger, source_table):
    sql = (
        f"SELECT exception_id, supplier_id AS vendor_id, supplier_name, po_number, exception_date, amount,"
        f" currency, quantity_ordered, quantity_received, notes FROM {source_table}"
    )

    with pytest.raises(BatchRejected, match=r"column 'supplier_id' missing; found 'vendor_id' \(similar\)"):
        run_gate(ledger, None, sql=sql, conn_id="gate_source")
    assert ledger.get_batch(WORKFLOW, "run-1", "gate")["status"] == "quarantined"


def test_query_with_no_rows_is_a_batch_failure(ledger, source_table):
    with pytest.raises(BatchRejected, match=r"no data rows"):
        run_gate(ledger, None, sql=f"SELECT * FROM {source_table} WHERE false", conn_id="gate_source")


def test_failing_query_names_the_connection_and_the_error(ledger, source_table):
    with pytest.raises(BatchRejected) as caught:
        run_gate(ledger, None, sql="SELECT * FROM gate_src.no_such_table", conn_id="gate_source")

    assert "the source query failed on connection 'gate_source'" in caught.value.reason
    assert "no_such_table" in caught.value.reason
