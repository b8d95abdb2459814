"""A move is driven by its item ids, whatever the planner's statistics say about the statuses.

A real ledger holds millions of finished items; its statistics, taken before a new run's items
arrived, say that almost no item is ``received``. A statement that lets the planner filter the
items by status first then expects one row, and rescans the whole id list for every item it
finds: with 2M items that took 10-20 s per 10k ids. The move must look each id up by key instead.
"""

from __future__ import annotations

import pytest

from conveyor.ledger import NewItem
from conveyor.ledger.moves import move_data, move_statement
from tests.support.plans import plan_nodes

WF = "supplier_exceptions"


@pytest.mark.parametrize("fields", [[], ["reason", "confidence"]], ids=["ids only", "with per-item data"])
@pytest.mark.parametrize("from_one", [True, False], ids=["from one status", "from several statuses"])
def test_a_move_looks_its_ids_up_by_key_when_statistics_say_no_item_is_in_its_status(ledger, from_one, fields):
    with ledger.connect() as conn:
        conn.execute(
            "INSERT INTO conveyor.items (item_id, workflow, business_key, run_id, status, payload, input_hash)"
            " SELECT 'supplier_exceptions:OLD-' || n, 'supplier_exceptions', 'OLD-' || n, 'run-' || (n / 500),"
            " 'published', '{}'::jsonb, md5(n::text) FROM generate_series(1, 200000) AS n"
        )
        # every item is published, as far as the planner knows
        conn.execute("ANALYZE conveyor.item_states, conveyor.item_bodies")
    items = [NewItem(f"NEW-{n:05d}", {"n": n}) for n in range(2000)]
    ledger.receive(WF, "today", items, actor="t")
    ids = sorted(f"{WF}:{i.business_key}" for i in items)
    params = {
        "item_id": ids,
        "from_statuses": ["received"] if from_one else ["received", "pending_review"],
        "from_status": "received",
        "to_status": "validated",
        "workflow": WF,
        "actor": "t",
        "reason": None,
    }

    if fields:  # per-item data travels as one JSON document
        params["data"] = move_data(ids, {"reason": ["r"] * len(ids), "confidence": [0.9] * len(ids)})

    with ledger.connect() as conn:
        statement = move_statement(fields, from_one=from_one)
        (plan,) = conn.execute("EXPLAIN (FORMAT JSON) " + statement, params).fetchone()

    nodes = list(plan_nodes(plan[0]["Plan"]))
    scans = [(n["Node Type"], n.get("Relation Name"), n.get("Index Name")) for n in nodes if "Relation Name" in n]
    item_scans = [scan for scan in scans if scan[1] in ("item_states", "item_bodies") and "Scan" in scan[0]]
    # Each given id looked up by key: its state row, and its body when the move carries the body's
    # data; never a scan of the items "in status X" the statistics would misjudge.
    assert item_scans and all(
        scan in (("Index Scan", "item_states", "item_states_pkey"), ("Index Scan", "item_bodies", "item_bodies_pkey"))
        for scan in item_scans
    ), scans
    if fields:  # the per-item data includes the body's (confidence)
        assert ("Index Scan", "item_bodies", "item_bodies_pkey") in item_scans, scans
    result = ledger.transition(WF, ids, to_status="validated", from_status=params["from_statuses"], actor="t")
    assert len(result.moved) == 2000 and not result.not_moved


def test_the_newest_items_of_a_workflow_are_read_in_index_order_not_sorted(ledger):
    """``conveyor items --workflow W`` without a run: at 2M items, a sort of every item of the
    workflow took 0.6 s; reading the body's (workflow, created_at) index in order stops at the
    limit. That index is the body's, which no move writes (migration 0019)."""
    from conveyor.ledger.lookup import items_query

    with ledger.connect() as conn:
        conn.execute(
            "INSERT INTO conveyor.items (item_id, workflow, business_key, run_id, status, payload, input_hash,"
            " created_at) SELECT 'supplier_exceptions:OLD-' || n, 'supplier_exceptions', 'OLD-' || n,"
            " 'run-' || (n / 500), 'published', '{}'::jsonb, md5(n::text), now() - n * interval '1 second'"
            " FROM generate_series(1, 200000) AS n"
        )
        conn.execute("ANALYZE conveyor.item_states, conveyor.item_bodies")
        # the oldest received moves last: "newest" is when an item arrived, not when it last moved
        conn.execute("UPDATE conveyor.item_states SET updated_at = now() + interval '1 hour'"
                     " WHERE item_id = 'supplier_exceptions:OLD-200000'")
        query, params = items_query(workflow=WF, run_id=None, status=None, limit=100)
        (plan,) = conn.execute("EXPLAIN (FORMAT JSON) " + query, params).fetchone()
        rows = conn.execute(query, params).fetchall()
        # none of the state row's indexes is an order of "newest": a move writes an entry in each
        indexes = [r[0] for r in conn.execute(
            "SELECT indexname FROM pg_indexes WHERE schemaname = 'conveyor' AND tablename = 'item_states'"
            " AND indexdef LIKE '%%updated_at DESC%%'"
        ).fetchall()]  # fmt: skip

    nodes = list(plan_nodes(plan[0]["Plan"]))
    assert not [node for node in nodes if node["Node Type"] in ("Sort", "Incremental Sort")], nodes
    assert any(node.get("Index Name") == "item_bodies_workflow_received" for node in nodes), nodes
    assert [row[0] for row in rows[:2]] == ["supplier_exceptions:OLD-1", "supplier_exceptions:OLD-2"]
    assert len(rows) == 100 and indexes == []
