"""The queue page, ordered by a declared priority field, reads only the items waiting for a person,
however many items the ledger holds (and with statistics taken before they arrived)."""

from __future__ import annotations

from conveyor import Workflow
from conveyor.ledger.statuses import REVIEW_VALUES
from conveyor.review.cards import priority_sql
from conveyor.review.review_queue import page_sql
from tests.review.conftest import route_to_review
from tests.support.plans import plan_nodes

PRIORITY = Workflow(name="plan_orders", priority_field="payload.amount")


def test_the_page_ordered_by_the_priority_field_never_scans_every_item(ledger):
    ledger.declare(PRIORITY, actor="tests")
    with ledger.connect() as conn:
        conn.execute(
            "INSERT INTO conveyor.items (item_id, workflow, business_key, run_id, status, payload, input_hash)"
            " SELECT 'plan_orders:OLD-' || n, 'plan_orders', 'OLD-' || n, 'run-' || (n / 1000), 'published',"
            " jsonb_build_object('amount', n), md5(n::text) FROM generate_series(1, 200000) AS n"
        )
        conn.execute("ANALYZE conveyor.item_states, conveyor.item_bodies")
    keys = [f"NEW-{n}" for n in range(300)]
    route_to_review(
        ledger, PRIORITY.name, "run-new", pending=keys, payloads={k: {"amount": i} for i, k in enumerate(keys)}
    )

    for where, extra in (
        ("status = ANY(%(statuses)s)", {}),
        ("status = ANY(%(statuses)s) AND workflow = ANY(%(workflows)s)", {"workflows": [PRIORITY.name]}),
    ):
        params = {"statuses": REVIEW_VALUES, "limit": 50, "offset": 0, **extra}
        order = priority_sql({PRIORITY.name: ledger.workflow(PRIORITY.name)}, params)
        with ledger.connect() as conn:
            (plan,) = conn.execute("EXPLAIN (FORMAT JSON) " + page_sql(where, order), params).fetchone()
            rows = conn.execute(page_sql(where, order), params).fetchall()
        scans = [
            (node["Node Type"], node.get("Index Name"))
            for node in plan_nodes(plan[0]["Plan"])
            if "Scan" in node["Node Type"]
        ]
        assert scans and all(kind != "Seq Scan" for kind, _ in scans), scans
        assert len(rows) == 50 and [r[-1] for r in rows[:3]] == [299, 298, 297]  # the largest amounts first


def test_a_bulk_decision_by_filter_selects_its_items_by_index_however_many_items_the_ledger_holds(ledger):
    from conveyor.review.bulk import QueueFilter, matching_ids, matching_sql

    wf, other = "supplier_exceptions", "invoice_processing"
    with ledger.connect() as conn:
        # Two years of decided items of both workflows (statistics taken before today's queue).
        conn.execute(
            "INSERT INTO conveyor.items (item_id, workflow, business_key, run_id, status, payload, input_hash)"
            " SELECT w || ':OLD-' || n, w, 'OLD-' || n, 'run-' || (n / 1000), 'published', '{}'::jsonb,"
            " md5(n::text) FROM generate_series(1, 100000) AS n, unnest(%s::text[]) AS w",
            ([wf, other],),
        )
        conn.execute("ANALYZE conveyor.item_states, conveyor.item_bodies")
    route_to_review(ledger, wf, "run-today", pending=[f"P{n}" for n in range(200)], quarantined=["Q1", "Q2"])
    route_to_review(ledger, wf, "run-yesterday", pending=["Y1"])
    route_to_review(ledger, other, "run-today", quarantined=["INV-1"])

    cases = [
        (QueueFilter([wf]), 203),
        (QueueFilter([wf], run_id="run-today"), 202),
        (QueueFilter([wf], status="quarantined"), 2),
        (QueueFilter([wf], run_id="run-today", status="pending_review"), 200),
        (QueueFilter([wf, other]), 204),  # no workflow named: every one the reviewer may decide on
    ]
    for where, expected in cases:
        query, params = matching_sql(where)
        with ledger.connect() as conn:
            (plan,) = conn.execute("EXPLAIN (FORMAT JSON) " + query, params).fetchone()
        scans = [
            (node["Node Type"], node.get("Relation Name"), node.get("Index Name"))
            for node in plan_nodes(plan[0]["Plan"])
            if "Scan" in node["Node Type"]
        ]
        assert scans and all(kind != "Seq Scan" for kind, _, _ in scans), (where, scans)
        assert len(matching_ids(ledger, where)) == expected, where
