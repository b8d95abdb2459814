"""The monitoring reads of the audit trail: throughput, exceptions, cycle time, runs
(the review queue over time is :mod:`conveyor.ledger.queue_history`).

Every number of :mod:`conveyor.monitoring.metrics` is read here from ``conveyor.transitions`` (one
row per status change, with its time) and ``conveyor.items``, set-based, for any moment. What the
numbers mean (baselines, trends, which sources drive the rate) is monitoring's; this module only
owns the statements and what a row of each comes back as. Each function takes an open connection,
so one measurement reads every number through one connection.

The statements must hold up on a log of millions of rows: each window is an index range scan
(``LATERAL ... OFFSET 0``), each item's history a lookup by its id (``tests/monitoring/test_plans.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from conveyor.ledger.statuses import EXCEPTION_STATUSES, STOPPED_STATUSES, UNRESOLVED_VALUES
from conveyor.workflow import STAGES, Workflow

if TYPE_CHECKING:
    import psycopg

#: The review queue as monitoring sees it: items waiting for a person, and corrected items waiting
#: for their run's review step to validate them again (stuck there when no step of the run waits).
REVIEW = UNRESOLVED_VALUES
#: What counts as an exception: quarantined input and doubtful results, never a routine approval.
EXCEPTIONS = sorted(EXCEPTION_STATUSES)
STOPPED = sorted(STOPPED_STATUSES)


@dataclass(frozen=True)
class Window:
    """A half-open time range ``[start, end)`` with a label the SQL groups by.

    :param label: several windows may share a label; their items are pooled.
    """

    label: str
    start: datetime
    end: datetime


@dataclass(frozen=True)
class RunCounts:
    """Where the items of one run are now.

    :param received: items the run received; ``done``, ``in_review`` and ``stopped`` are parts of it.
    :param last_change: the latest change of any of its items.
    """

    run_id: str
    started: datetime
    received: int
    done: int
    in_review: int
    stopped: int
    last_change: datetime


# -- the statements -------------------------------------------------------------------------------------------

_WINDOWS = "unnest(%(labels)s::text[], %(starts)s::timestamptz[], %(ends)s::timestamptz[]) AS w(label, s, e)"

_ACTIVE_WORKFLOWS_SQL = """
WITH RECURSIVE names(workflow) AS (  -- a loose index scan: one probe per workflow, not per item
    (SELECT workflow FROM conveyor.item_states ORDER BY workflow LIMIT 1)
    UNION ALL
    SELECT (SELECT i.workflow FROM conveyor.item_states i WHERE i.workflow > n.workflow ORDER BY i.workflow LIMIT 1)
    FROM names n WHERE n.workflow IS NOT NULL
)
SELECT workflow FROM names n
WHERE workflow IS NOT NULL
  AND EXISTS (SELECT 1 FROM conveyor.transitions t WHERE t.workflow = n.workflow AND t.at >= %(since)s)
ORDER BY workflow
"""

_THROUGHPUT_SQL = f"""
SELECT w.label, count(t.id)
FROM {_WINDOWS}
LEFT JOIN conveyor.transitions t
  ON t.workflow = %(workflow)s AND t.to_status = %(done)s AND t.at >= w.s AND t.at < w.e
GROUP BY w.label
"""

# Items received in each window, and whether each went to review or quarantine by as_of.
_COHORT_CTE = f"""
cohort AS (
    SELECT DISTINCT w.label, t.item_id
    FROM {_WINDOWS}
    CROSS JOIN LATERAL (  -- LATERAL: an index range scan per window, never a scan of the whole log
        SELECT t.item_id FROM conveyor.transitions t
        WHERE t.workflow = %(workflow)s AND t.to_status = %(first)s AND t.from_status IS NULL
          AND t.at >= w.s AND t.at < w.e
        OFFSET 0  -- keeps the subquery (and its index scan) from being flattened into a join
    ) t
), flagged AS (
    SELECT c.label, c.item_id, EXISTS (
        SELECT 1 FROM conveyor.transitions x
        WHERE x.item_id = c.item_id AND x.to_status = ANY(%(exceptions)s) AND x.at < %(as_of)s
          AND NOT COALESCE(x.detail @> '{{"spot_check": true}}', false)
    ) AS exception, EXISTS (
        SELECT 1 FROM conveyor.transitions x
        WHERE x.item_id = c.item_id AND x.to_status = 'pending_approval' AND x.at < %(as_of)s
    ) AS approval
    FROM cohort c
)
"""

_EXCEPTIONS_SQL = f"""
WITH {_COHORT_CTE}
SELECT label, count(*), count(*) FILTER (WHERE exception), count(*) FILTER (WHERE approval AND NOT exception)
FROM flagged GROUP BY label
"""

# Where the items received in the current window are now (the "stuck at" of a zero-output alert).
_COHORT_STATUS_SQL = f"""
WITH {_COHORT_CTE}
SELECT i.status, count(*) FROM flagged f JOIN conveyor.items i USING (item_id)
WHERE f.label = 'current' GROUP BY i.status ORDER BY count(*) DESC, i.status
"""

_SOURCES_SQL = f"""
WITH {_COHORT_CTE}
SELECT f.label,
       COALESCE(i.payload ->> %(field)s, i.ai_result ->> %(field)s, '(none)') AS source,
       count(*), count(*) FILTER (WHERE f.exception)
FROM flagged f JOIN conveyor.items i USING (item_id)
GROUP BY 1, 2
"""


# Cycle time of the items completed in each window: total and per stage, zero for a stage the
# item never waited in (so a stage's share of the cycle is visible, not only its waits). One row per
# item with a column per stage, then one pass per window; item ids sort bytewise (COLLATE "C"),
# which is all a partition needs and several times cheaper than a locale's collation.
def _cycle_sql() -> str:
    per_stage = ",\n           ".join(
        f"COALESCE(sum(extract(epoch FROM s.left_at - s.at)) FILTER (WHERE m.stage = '{st}'), 0)"
        "::float8"
        f" AS {st}"
        for st in STAGES
    )
    stats = ",\n       ".join(
        f"percentile_cont(ARRAY[0.5, 0.95]) WITHIN GROUP (ORDER BY p.{st}), avg(p.{st}),"
        f" count(*) FILTER (WHERE p.{st} > 0)"
        for st in STAGES
    )
    return f"""
WITH done AS (
    SELECT DISTINCT w.label, t.item_id, t.at AS done_at
    FROM {_WINDOWS}
    CROSS JOIN LATERAL (  -- LATERAL: an index range scan per window, never a scan of the whole log
        SELECT t.item_id, t.at FROM conveyor.transitions t
        WHERE t.workflow = %(workflow)s AND t.to_status = %(done)s AND t.at >= w.s AND t.at < w.e
        OFFSET 0  -- keeps the subquery (and its index scan) from being flattened into a join
    ) t
), completed AS (
    SELECT DISTINCT item_id, done_at FROM done
), steps AS (
    SELECT x.item_id, x.to_status, x.at,
           lead(x.at) OVER (PARTITION BY x.item_id COLLATE "C" ORDER BY x.at, x.id) AS left_at
    FROM completed c
    CROSS JOIN LATERAL (  -- each completed item's own history, by its index
        SELECT x.item_id, x.to_status, x.at, x.id FROM conveyor.transitions x
        WHERE x.item_id = c.item_id AND x.at <= c.done_at
        OFFSET 0
    ) x
), per_item AS (
    SELECT s.item_id, min(s.at) AS entered,
           {per_stage}
    FROM steps s
    LEFT JOIN unnest(%(map_statuses)s::text[], %(map_stages)s::text[]) AS m(status, stage)
           ON m.status = s.to_status
    GROUP BY s.item_id
), per_window AS (
    SELECT d.label, extract(epoch FROM d.done_at - p.entered)::float8 AS total, p.*
    FROM done d JOIN per_item p USING (item_id)
)
SELECT label, count(*),
       percentile_cont(ARRAY[0.5, 0.95]) WITHIN GROUP (ORDER BY total), avg(total),
       {stats}
FROM per_window p GROUP BY label
"""


_CYCLE_SQL = _cycle_sql()

_RUNS_SQL = """
WITH recent AS (
    SELECT run_id, min(at) AS started
    FROM conveyor.transitions
    WHERE workflow = %(workflow)s AND to_status = %(first)s AND from_status IS NULL
      AND at >= %(since)s AND at < %(until)s AND (%(run_id)s::text IS NULL OR run_id = %(run_id)s)
    GROUP BY run_id
    ORDER BY started DESC
    LIMIT %(limit)s
)
SELECT r.run_id, r.started, count(i.item_id),
       count(*) FILTER (WHERE i.status = %(done)s),
       count(*) FILTER (WHERE i.status = ANY(%(review)s)),
       count(*) FILTER (WHERE i.status = ANY(%(stopped)s)),
       max(i.updated_at)
FROM recent r JOIN conveyor.items i ON i.workflow = %(workflow)s AND i.run_id = r.run_id
GROUP BY r.run_id, r.started
ORDER BY r.started DESC
"""


def _window_params(windows: Sequence[Window]) -> dict[str, Any]:
    return {
        "labels": [w.label for w in windows],
        "starts": [w.start for w in windows],
        "ends": [w.end for w in windows],
    }


def _cohort_params(flow: Workflow, as_of: datetime, windows: Sequence[Window]) -> dict[str, Any]:
    return {"workflow": flow.name, "first": flow.first, "exceptions": EXCEPTIONS, "as_of": as_of,
            **_window_params(windows)}


def _empty_stats() -> dict[str, Any]:
    return {"p50": None, "p95": None, "mean": None, "waited": 0}


# -- reads -----------------------------------------------------------------------------------------


def active_workflows(conn: psycopg.Connection[Any], *, since: datetime) -> list[str]:
    """Workflows in the ledger with any status change since ``since``."""
    return [row[0] for row in conn.execute(_ACTIVE_WORKFLOWS_SQL, {"since": since}).fetchall()]


def throughput(
    conn: psycopg.Connection[Any], workflow: str, done: str, windows: Sequence[Window]
) -> dict[str, int]:
    """label -> items that reached ``done`` in the window(s) of that label (labels without any: absent)."""
    params = {"workflow": workflow, "done": done, **_window_params(windows)}
    return {label: count for label, count in conn.execute(_THROUGHPUT_SQL, params).fetchall()}


def exceptions(
    conn: psycopg.Connection[Any], flow: Workflow, windows: Sequence[Window], as_of: datetime
) -> dict[str, tuple[int, int, int]]:
    """label -> (received, exceptions, routine approvals) of the items received in the window(s)."""
    rows = conn.execute(_EXCEPTIONS_SQL, _cohort_params(flow, as_of, windows)).fetchall()
    found = {label: (received, exc, approvals) for label, received, exc, approvals in rows}
    return {w.label: found.get(w.label, (0, 0, 0)) for w in windows}


def sources(
    conn: psycopg.Connection[Any], flow: Workflow, windows: Sequence[Window], as_of: datetime, field: str
) -> dict[str, dict[str, tuple[int, int]]]:
    """source -> label -> (received, exceptions); the source is the payload's (or AI result's) ``field``."""
    params = {
        **_cohort_params(flow, as_of, windows),
        "field": field,
    }
    out: dict[str, dict[str, tuple[int, int]]] = {}
    for label, source, received, exc in conn.execute(_SOURCES_SQL, params).fetchall():
        out.setdefault(source, {})[label] = (received, exc)
    return out


def received_by_status(
    conn: psycopg.Connection[Any], flow: Workflow, window: Window, as_of: datetime
) -> dict[str, int]:
    """status -> items received in ``window`` that are in it now, most first."""
    return dict(conn.execute(_COHORT_STATUS_SQL, _cohort_params(flow, as_of, [window])).fetchall())


def cycle(
    conn: psycopg.Connection[Any], flow: Workflow, windows: Sequence[Window]
) -> dict[str, dict[str, Any]]:
    """label -> {"items": n, "total": stats, "stages": {stage: stats}} of the items completed in it.

    A stats dict holds ``p50``, ``p95``, ``mean`` (seconds; None without items) and ``waited`` (the
    items that spent any time in the stage).
    """
    mapping = flow.stage_map()
    params = {
        "workflow": flow.name,
        "done": flow.done,
        "map_statuses": list(mapping),
        "map_stages": list(mapping.values()),
        **_window_params(windows),
    }
    out: dict[str, dict[str, Any]] = {}
    for row in conn.execute(_CYCLE_SQL, params).fetchall():
        label, items, (p50, p95), mean = row[0], row[1], row[2], row[3]
        stages = {}
        for i, stage in enumerate(STAGES):
            (s50, s95), smean, waited = row[4 + 3 * i : 7 + 3 * i]
            stages[stage] = {"p50": s50, "p95": s95, "mean": smean, "waited": waited}
        out[label] = {
            "items": items,
            "total": {"p50": p50, "p95": p95, "mean": mean, "waited": items},
            "stages": stages,
        }
    for w in windows:
        out.setdefault(
            w.label,
            {"items": 0, "total": _empty_stats(), "stages": {s: _empty_stats() for s in STAGES}},
        )
    return out


def run_counts(
    conn: psycopg.Connection[Any],
    flow: Workflow,
    *,
    run_id: str | None,
    limit: int,
    since: datetime,
    until: datetime,
) -> list[RunCounts]:
    """The runs that received their first item in ``[since, until)``, newest first.

    :param run_id: only this run.
    :param limit: at most this many runs.
    """
    params = {
        "workflow": flow.name,
        "first": flow.first,
        "done": flow.done,
        "review": REVIEW,
        "stopped": STOPPED,
        "since": since,
        "until": until,
        "run_id": run_id,
        "limit": limit,
    }
    return [RunCounts(*row) for row in conn.execute(_RUNS_SQL, params).fetchall()]
