"""Health numbers read only the measured windows of the audit log, whatever its size.

The log grows by every status change, forever. Joining the windows to it let the planner scan all
of it: measure() took 8 s on 8M transitions at 5,500 items a day (2 s once each window is an index
range scan, and each completed item's history a lookup by its id).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from conveyor.ledger import metric_reads as reads
from conveyor.monitoring import metrics
from tests.support.plans import plan_nodes
from tests.support.workflows import declaration

WF = "supplier_exceptions"


@pytest.mark.parametrize("query", ["cycle", "exceptions", "sources"])
def test_the_windows_and_the_histories_are_read_by_index_never_the_whole_log(ledger, query):
    with ledger.connect() as conn:
        # A year of history, 400 items a day, four status changes each.
        conn.execute(
            "INSERT INTO conveyor.items (item_id, workflow, business_key, run_id, status, payload, input_hash)"
            " SELECT 'supplier_exceptions:OLD-' || n, 'supplier_exceptions', 'OLD-' || n, 'run-' || (n / 400),"
            " 'published', '{}'::jsonb, md5(n::text) FROM generate_series(1, 146000) AS n"
        )
        conn.execute(
            "INSERT INTO conveyor.transitions (item_id, run_id, workflow, from_status, to_status, at, actor)"
            " SELECT 'supplier_exceptions:OLD-' || n, 'run-' || (n / 400), 'supplier_exceptions', s.f, s.t,"
            " now() - (146000 - n) * interval '216 seconds' + s.d, 'seed'"
            " FROM generate_series(1, 146000) AS n, (VALUES (NULL, 'received', interval '0'),"
            " ('received', 'validated', interval '1 minute'), ('validated', 'ai_processed', interval '5 minutes'),"
            " ('ai_processed', 'published', interval '2 hours')) AS s(f, t, d)"
        )
        conn.execute("ANALYZE conveyor.item_states, conveyor.item_bodies")
        conn.execute("ANALYZE conveyor.transitions")
    as_of = datetime.now(UTC)
    flow = declaration(WF)
    mapping = flow.stage_map()
    params = {
        **reads._cohort_params(flow, as_of, []),
        "done": "published",
        "review": metrics.REVIEW,
        "field": "supplier_id",
        "map_statuses": list(mapping),
        "map_stages": list(mapping.values()),
        **reads._window_params(metrics.comparison_windows(as_of, timedelta(hours=24), 7)),
    }
    sql = {"cycle": reads._CYCLE_SQL, "exceptions": reads._EXCEPTIONS_SQL, "sources": reads._SOURCES_SQL}

    with ledger.connect() as conn:
        (plan,) = conn.execute("EXPLAIN (FORMAT JSON) " + sql[query], params).fetchone()

    scans = [
        (node["Node Type"], node.get("Relation Name"), node.get("Index Name"))
        for node in plan_nodes(plan[0]["Plan"])
        if "Scan" in node["Node Type"]
    ]
    assert [s for s in scans if s[1] == "transitions" and s[0] == "Seq Scan"] == [], scans
    assert ("Index Scan", "transitions", "transitions_workflow_to_at") in scans
