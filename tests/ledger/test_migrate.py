"""Versioned migrations: idempotent, safe to run concurrently, and items in flight keep working."""

from __future__ import annotations

import multiprocessing as mp

import psycopg

from conveyor.ledger import Ledger
from conveyor.ledger.migrate import available_migrations
from tests.support.workflows import SUPPLIER

WF = "supplier_exceptions"


def test_upgrade_is_idempotent(fresh_db):
    ledger = Ledger(fresh_db)
    applied = ledger.upgrade()
    assert applied[0] == "0001_items"
    assert len(applied) == len(available_migrations())
    assert ledger.upgrade() == []
    assert ledger.schema_version() == available_migrations()[-1].version


def test_items_written_under_the_first_schema_survive_the_upgrade(fresh_db):
    ledger = Ledger(fresh_db)
    assert ledger.upgrade(target=1) == ["0001_items"]
    # Items in flight, written by a worker that still ran the first release.
    with psycopg.connect(fresh_db) as conn:
        conn.execute(
            "INSERT INTO conveyor.items (item_id, workflow, business_key, run_id, status, payload, input_hash)"
            " VALUES (%s, %s, 'PO-1', 'old-run', 'validated', '{\"notes\": \"ü\"}', 'h1'),"
            "        (%s, %s, 'PO-2', 'old-run', 'received', '{}', 'h2')",
            (f"{WF}:PO-1", WF, f"{WF}:PO-2", WF),
        )
        conn.execute(
            "INSERT INTO conveyor.transitions (item_id, run_id, from_status, to_status, actor, at) VALUES"
            " (%s, 'old-run', NULL, 'received', 'old#1', '2026-01-01T10:00:00Z'),"
            " (%s, 'old-run', 'received', 'validated', 'old#1', '2026-01-01T10:05:00Z'),"
            " (%s, 'old-run', NULL, 'received', 'old#1', '2026-01-01T10:00:00Z')",
            (f"{WF}:PO-1", f"{WF}:PO-1", f"{WF}:PO-2"),
        )

    applied = ledger.upgrade()

    assert "0002_stages_review_effects" in applied
    item = ledger.get(f"{WF}:PO-1")
    assert item.payload == {"notes": "ü"}
    assert item.schema_version == 1
    assert set(item.stage_times) == {"received", "validated"}
    assert item.stage_times["validated"].startswith("2026-01-01T10:05:00")
    assert item.workflow_version is None  # received before declarations: they follow the latest
    # The upgraded items keep moving through the current code, once the new DAG declared its workflow.
    ledger.declare(SUPPLIER)
    result = ledger.transition(
        WF, [f"{WF}:PO-1", f"{WF}:PO-2"], to_status="ai_processed", from_status="validated", actor="new#1"
    )
    assert result.moved == [f"{WF}:PO-1"]
    assert result.not_moved == {f"{WF}:PO-2": "received"}
    history = ledger.history(f"{WF}:PO-1")
    assert [r.to_status for r in history] == ["received", "validated", "ai_processed"]


def test_the_examples_payments_table_leaves_the_library_without_losing_a_payment(fresh_db, tmp_path):
    empty, kept = Ledger(fresh_db), None
    empty.upgrade(target=7)
    empty.upgrade()
    with psycopg.connect(fresh_db) as conn:
        assert conn.execute("SELECT to_regclass('conveyor.payments')").fetchone() == (None,)
        # An install that paid through 0007's table keeps it (the example takes it over).
        conn.execute("DROP SCHEMA conveyor CASCADE")
    kept = Ledger(fresh_db)
    kept.upgrade(target=7)
    with psycopg.connect(fresh_db) as conn:
        conn.execute(
            "INSERT INTO conveyor.payments (item_id, vendor_id, invoice_number, amount, currency, idempotency_key,"
            " run_id) VALUES ('invoice_processing:INV-1', 'V-1', 'INV-1', 10, 'EUR', 'k1', 'r1')"
        )
    kept.upgrade()
    with psycopg.connect(fresh_db) as conn:
        assert conn.execute("SELECT count(*) FROM conveyor.payments").fetchone() == (1,)


def _upgrade(dsn: str, out) -> None:
    out.put(Ledger(dsn).upgrade())


def test_concurrent_starters_apply_each_migration_once(fresh_db):
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_upgrade, args=(fresh_db, out)) for _ in range(3)]
    for p in procs:
        p.start()
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    applied = sorted(name for result in results for name in result)
    assert applied == sorted(f"{m.version:04d}_{m.name}" for m in available_migrations())
    with psycopg.connect(fresh_db) as conn:
        assert conn.execute("SELECT count(*) FROM conveyor.schema_migrations").fetchone() == (
            len(available_migrations()),
        )
