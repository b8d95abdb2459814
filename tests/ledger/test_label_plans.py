"""A bulk decision's labels are built from each decided item's own audit rows, looked up by key.

A ledger of millions of transitions: the move that routed each decided item to review is found
through ``transitions_item`` (item id, id) for each item, never by a scan of the audit log.
"""

from __future__ import annotations

import json

from conveyor.ledger.ai_labels import _RECORD_LABELS
from tests.support.plans import plan_nodes


def test_labels_of_a_bulk_decision_read_the_audit_log_by_item(ledger):
    with ledger.connect() as conn:
        conn.execute(
            "INSERT INTO conveyor.transitions (item_id, workflow, run_id, from_status, to_status, actor, detail)"
            " SELECT 'supplier_exceptions:OLD-' || n, 'supplier_exceptions', 'run-' || (n / 500), 'validated',"
            " 'pending_review', 't', jsonb_build_object('ai_step', 'classify', 'confidence', 0.4, 'spot_check',"
            " false, 'share', 1.0) FROM generate_series(1, 200000) AS n"
        )
        conn.execute("ANALYZE conveyor.transitions")
        ids = [f"supplier_exceptions:OLD-{n}" for n in range(1, 2001)]
        params = {"ids": ids, "outcomes": ["right"] * len(ids), "fields": [json.dumps([])] * len(ids), "actor": "t"}
        (plan,) = conn.execute("EXPLAIN (FORMAT JSON) " + _RECORD_LABELS, params).fetchone()
        nodes = list(plan_nodes(plan[0]["Plan"]))
        scanned = [n for n in nodes if n.get("Relation Name") == "transitions"]
        assert scanned and all(n["Node Type"] in ("Index Scan", "Index Only Scan") for n in scanned), scanned
        assert {n.get("Index Name") for n in scanned} == {"transitions_item"}, scanned
        assert conn.execute(_RECORD_LABELS, params).rowcount == 2000
