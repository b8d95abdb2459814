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


#: One item in each status of the supplier workflow, as a ledger at schema 17 holds them.
_EVERY_STATUS = (
    "received", "validated", "ai_processed", "pending_review", "quarantined", "corrected",
    "pending_approval", "approved", "published", "rejected", "failed", "cancelled",
)


def _fill_at_schema_17(dsn: str) -> None:
    """Items in every status with their audit rows, an effect claimed and one done, a reviewer's
    claim, an escalation and a step's lease: what a ledger of the previous release holds mid-run."""
    with psycopg.connect(dsn) as conn:
        for n, status in enumerate(_EVERY_STATUS):
            item_id = f"{WF}:EX-{n:02d}"
            ai = '{"category": "late_delivery"}' if status not in ("received", "validated", "quarantined") else None
            conn.execute(
                "INSERT INTO conveyor.items (item_id, workflow, business_key, run_id, status, payload, input_hash,"
                " attempts, last_error, ai_result, confidence, stage_times, reason, review_target, priority,"
                " workflow_version, updated_at)"
                " VALUES (%s, %s, %s, 'old-run', %s, %s, %s, %s, %s, %s, %s,"
                " jsonb_build_object('received', '2026-12-01T10:00:00+00:00'::text, %s::text, now()::text),"
                " %s, %s, %s, 1, now() - make_interval(mins => %s))",
                (item_id, WF, f"EX-{n:02d}", status, f'{{"exception_id": "EX-{n:02d}", "amount": 10.5}}', f"h{n}",
                 n % 3, "timeout" if status == "failed" else None, ai, 0.8 if ai else None, status,
                 f"why {status}" if status != "received" else None,
                 "approved" if status == "pending_review" else None, n % 2, n),
            )
            conn.execute(
                "INSERT INTO conveyor.transitions (item_id, run_id, workflow, from_status, to_status, actor, at)"
                " VALUES (%s, 'old-run', %s, NULL, 'received', 'old#1', '2026-12-01T10:00:00Z')",
                (item_id, WF),
            )
            if status != "received":
                conn.execute(
                    "INSERT INTO conveyor.transitions (item_id, run_id, workflow, from_status, to_status, actor,"
                    " reason) VALUES (%s, 'old-run', %s, 'received', %s, 'old#1', %s)",
                    (item_id, WF, status, f"why {status}"),
                )
        ids = {status: f"{WF}:EX-{n:02d}" for n, status in enumerate(_EVERY_STATUS)}
        conn.execute(
            "INSERT INTO conveyor.effects (item_id, step, state, claimed_by)"
            " VALUES (%s, 'publish', 'claimed', 'old#1')",
            (ids["approved"],),
        )
        conn.execute(
            "INSERT INTO conveyor.effects (item_id, step, state, result, claimed_by, completed_at)"
            " VALUES (%s, 'publish', 'done', '{\"report\": \"r1\"}', 'old#1', now())",
            (ids["published"],),
        )
        conn.execute(
            "INSERT INTO conveyor.review_claims (item_id, reviewer, expires_at)"
            " VALUES (%s, 'ana', now() + interval '1h')",
            (ids["pending_review"],),
        )
        conn.execute(
            "INSERT INTO conveyor.review_escalations (item_id, step, waiting_since, workflow, run_id, action)"
            " VALUES (%s, 'review', now() - interval '2h', %s, 'old-run', 'alert')",
            (ids["quarantined"], WF),
        )
        conn.execute(
            "INSERT INTO conveyor.step_leases (step, item_id, workflow, holder, attempt, expires_at)"
            " VALUES ('ai', %s, %s, 'old-worker', 1, now() - interval '1 min')",
            (ids["validated"], WF),
        )


def test_a_ledger_of_the_previous_schema_migrates_in_place_and_its_runs_finish(fresh_db):
    """0018 splits each item into its state row and its body (0019 moves the "newest" index to the
    body): an upgraded ledger reads the same, item for item and audit row for audit row, and every
    item moves on to a final status."""
    ledger = Ledger(fresh_db)
    ledger.upgrade(target=17)
    ledger.declare(SUPPLIER)
    _fill_at_schema_17(fresh_db)
    ids = {status: f"{WF}:EX-{n:02d}" for n, status in enumerate(_EVERY_STATUS)}
    with psycopg.connect(fresh_db) as conn:
        before = conn.execute("SELECT * FROM conveyor.items ORDER BY item_id").fetchall()
        audit_before = conn.execute("SELECT * FROM conveyor.transitions ORDER BY id").fetchall()
    histories = {item_id: ledger.history(item_id) for item_id in ids.values()}

    assert ledger.upgrade() == ["0018_item_states", "0019_newest_by_received"]

    with psycopg.connect(fresh_db) as conn:
        assert conn.execute("SELECT * FROM conveyor.items ORDER BY item_id").fetchall() == before
        assert conn.execute("SELECT * FROM conveyor.transitions ORDER BY id").fetchall() == audit_before
        assert conn.execute("SELECT to_regclass('conveyor.item_states'), to_regclass('conveyor.item_bodies')"
                            ).fetchone() == ("conveyor.item_states", "conveyor.item_bodies")
    assert {item_id: ledger.history(item_id) for item_id in ids.values()} == histories
    assert ledger.count_by_status(workflow=WF, run_id="old-run") == {status: 1 for status in _EVERY_STATUS}
    assert ledger.get(ids["pending_review"]).review_target == "approved"
    assert ledger.get(ids["failed"]).last_error == "timeout"

    # The runs finish through the current code: the step's lease expired, so the AI step claims
    # the validated item; its result is written on the item's body with the move.
    from conveyor.ledger.changes import ItemUpdate
    from conveyor.ledger.leases import Holder

    claim = ledger.claim_chunk(
        workflow=WF, run_id="old-run", status="validated", step="ai", holder=Holder("new-worker", 1), limit=10,
        lease_seconds=60,
    )
    assert claim.item_ids == [ids["validated"]]
    moves = [
        ("validated", "ai_processed", {ids["validated"]: ItemUpdate(ai_result={"category": "short"}, confidence=0.9)}),
        ("corrected", "validated", None),
        ("received", "validated", None),
        ("validated", "ai_processed", None),
        ("ai_processed", "approved", None),
        ("pending_review", "approved", None),
        ("pending_approval", "approved", None),
        ("quarantined", "rejected", None),
        ("failed", "cancelled", None),
    ]
    for from_status, to_status, updates in moves:
        chosen = updates or ledger.item_ids(workflow=WF, run_id="old-run", status=from_status)
        result = ledger.transition(WF, chosen, to_status=to_status, from_status=from_status, actor="new#1")
        assert result.moved and not result.not_moved, (from_status, to_status, result)
    approved = ledger.item_ids(workflow=WF, run_id="old-run", status="approved")
    # The old release's claim was left open (its worker gone): handed out again with the others.
    assert ids["approved"] in approved
    assert set(ledger.claim_effects("publish", approved, actor="new#1")) == set(approved)
    ledger.complete_effects("publish", {item_id: {"report": "r2"} for item_id in approved})
    ledger.transition(WF, approved, to_status="published", from_status="approved", actor="new#1")

    counts = ledger.count_by_status(workflow=WF, run_id="old-run")
    assert set(counts) <= SUPPLIER.terminal and sum(counts.values()) == len(_EVERY_STATUS), counts
    assert ledger.get(ids["validated"]).ai_result == {"category": "short"}
    assert ledger.get(ids["validated"]).confidence == 0.9
    assert ledger.get(ids["validated"]).payload == {"exception_id": "EX-01", "amount": 10.5}
    assert [r.to_status for r in ledger.history(ids["received"])] == [
        "received", "validated", "ai_processed", "approved", "published",
    ]
    assert set(ledger.get(ids["received"]).stage_times) == {"received", "validated", "ai_processed", "approved",
                                                            "published"}
    assert set(ledger.effects("publish")) == set(approved) | {ids["published"]}
