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
        conn.execute("ANALYZE conveyor.items")
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
