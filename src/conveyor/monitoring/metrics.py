"""Workflow health measured from the ledger's audit trail, with set-based SQL.

Every number is computed from ``conveyor.transitions`` (one row per status change, with its time),
so it can be measured for any moment, not only now, and the same code serves the hourly
``workflow_health`` DAG, the ``conveyor metrics`` command, the plugin API and the health page.

* **throughput**: items that reached the workflow's done status in the window, against the same
  window on each of the previous days (shifted by whole days);
* **exception rate**: of the items received in the window, the share routed to review or
  quarantine, its daily trend, and the sources (e.g. suppliers) driving it; a spot check (an
  answer that passed every check, sent to a person at random) is no exception and not counted;
* **cycle time**: entry to completion of the items completed in the window, p50 / p95 / mean,
  in total and by stage (gate, model, review, approval, publish: see :mod:`.stages`);
* **queue**: items waiting for a person at the end of the window, their age, and the queue size at
  the same time on the previous days;
* **progress per run**: items done of items received.

Results are plain JSON-ready dicts (ISO timestamps, seconds as floats).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from conveyor.ledger.statuses import EXCEPTION_STATUSES, STOPPED_STATUSES, UNRESOLVED_VALUES
from conveyor.ledger.store import Ledger
from conveyor.monitoring.stages import STAGES
from conveyor.workflow import Workflow

DAY = timedelta(days=1)
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


def utc(value: datetime | str | None = None) -> datetime:
    """A timezone-aware UTC datetime (now when None; ISO strings accepted)."""
    if value is None:
        return datetime.now(UTC)
    if isinstance(value, str):
        value = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if value.tzinfo is None:
        raise ValueError(f"timestamp {value.isoformat()} has no time zone")
    return value.astimezone(UTC)


def comparison_windows(as_of: datetime, window: timedelta, days: int) -> list[Window]:
    """The current window (label ``current``) and the same window 1..days days earlier (``d1``..)."""
    windows = [Window("current", as_of - window, as_of)]
    windows += [Window(f"d{d}", as_of - window - d * DAY, as_of - d * DAY) for d in range(1, days + 1)]
    return windows


def bucket_windows(as_of: datetime, span: timedelta, bucket: timedelta) -> list[Window]:
    """Consecutive buckets ending at ``as_of``, oldest first (labels ``b0``, ``b1``...)."""
    count = max(1, int(span / bucket))
    start = as_of - count * bucket
    return [Window(f"b{i}", start + i * bucket, start + (i + 1) * bucket) for i in range(count)]


# -- SQL -------------------------------------------------------------------------------------------

_WINDOWS = "unnest(%(labels)s::text[], %(starts)s::timestamptz[], %(ends)s::timestamptz[]) AS w(label, s, e)"

_ACTIVE_WORKFLOWS_SQL = """
WITH RECURSIVE names(workflow) AS (  -- a loose index scan: one probe per workflow, not per item
    (SELECT workflow FROM conveyor.items ORDER BY workflow LIMIT 1)
    UNION ALL
    SELECT (SELECT i.workflow FROM conveyor.items i WHERE i.workflow > n.workflow ORDER BY i.workflow LIMIT 1)
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
        f"COALESCE(sum(extract(epoch FROM s.left_at - s.at)) FILTER (WHERE m.stage = '{st.value}'), 0)"
        "::float8"
        f" AS {st.value}"
        for st in STAGES
    )
    stats = ",\n       ".join(
        f"percentile_cont(ARRAY[0.5, 0.95]) WITHIN GROUP (ORDER BY p.{st.value}), avg(p.{st.value}),"
        f" count(*) FILTER (WHERE p.{st.value} > 0)"
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

# Review-queue stays: (item, status, entered, left) for entries since the look-back, plus the items
# waiting right now however long ago they entered. UNION drops the rows both halves produce.
_QUEUE_ENTRIES_CTE = """
entries AS (
    SELECT e.item_id, e.to_status AS status, e.at AS entered,
           (SELECT min(x.at) FROM conveyor.transitions x
             WHERE x.item_id = e.item_id AND (x.at, x.id) > (e.at, e.id)) AS left_at
    FROM conveyor.transitions e
    WHERE e.workflow = %(workflow)s AND e.to_status = ANY(%(review)s)
      AND e.at >= %(since)s AND e.at <= %(until)s
    UNION
    SELECT i.item_id, i.status,
           (SELECT max(x.at) FROM conveyor.transitions x
             WHERE x.item_id = i.item_id AND x.to_status = i.status),
           NULL::timestamptz
    FROM conveyor.items i
    WHERE i.workflow = %(workflow)s AND i.status = ANY(%(review)s)
)
"""

_QUEUE_AT_SQL = f"""
WITH {_QUEUE_ENTRIES_CTE}, moments AS (SELECT unnest(%(times)s::timestamptz[]) AS t)
SELECT m.t, count(e.item_id),
       extract(epoch FROM max(m.t - e.entered))::float8,
       count(e.item_id) FILTER (WHERE m.t - e.entered > %(bound)s)
FROM moments m
LEFT JOIN entries e ON e.entered <= m.t AND (e.left_at IS NULL OR e.left_at > m.t)
GROUP BY m.t ORDER BY m.t
"""

_QUEUE_DETAIL_SQL = f"""
WITH {_QUEUE_ENTRIES_CTE}, waiting AS (
    SELECT * FROM entries e WHERE e.entered <= %(until)s AND (e.left_at IS NULL OR e.left_at > %(until)s)
)
SELECT 'status' AS kind, status AS item_id, status, count(*)::float8 AS value, NULL AS reason, NULL AS run_id
FROM waiting GROUP BY status
UNION ALL
(SELECT 'oldest', w.item_id, w.status, extract(epoch FROM %(until)s - w.entered)::float8, i.reason, i.run_id
 FROM waiting w JOIN conveyor.items i USING (item_id)
 ORDER BY w.entered, w.item_id LIMIT %(oldest)s)
"""

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


def _ratio(part: int, whole: int) -> float | None:
    return part / whole if whole else None


# -- reads -----------------------------------------------------------------------------------------


def active_workflows(ledger: Ledger, *, since: datetime) -> list[str]:
    """Workflows in the ledger with any status change since ``since``."""
    with ledger.connect() as conn:
        return [row[0] for row in conn.execute(_ACTIVE_WORKFLOWS_SQL, {"since": since}).fetchall()]


def _throughput(
    conn: psycopg.Connection, workflow: str, done: str, windows: Sequence[Window]
) -> dict[str, int]:
    params = {"workflow": workflow, "done": done, **_window_params(windows)}
    return {label: count for label, count in conn.execute(_THROUGHPUT_SQL, params).fetchall()}


def _cohort_params(flow: Workflow, as_of: datetime, windows: Sequence[Window]) -> dict[str, Any]:
    return {"workflow": flow.name, "first": flow.first, "exceptions": EXCEPTIONS, "as_of": as_of,
            **_window_params(windows)}


def _exceptions(
    conn: psycopg.Connection, flow: Workflow, windows: Sequence[Window], as_of: datetime
) -> dict[str, tuple[int, int, int]]:
    """label -> (received, exceptions, routine approvals)."""
    rows = conn.execute(_EXCEPTIONS_SQL, _cohort_params(flow, as_of, windows)).fetchall()
    found = {label: (received, exc, approvals) for label, received, exc, approvals in rows}
    return {w.label: found.get(w.label, (0, 0, 0)) for w in windows}


def _sources(
    conn: psycopg.Connection, flow: Workflow, windows: Sequence[Window], as_of: datetime, field: str
) -> dict[str, dict[str, tuple[int, int]]]:
    """source -> label -> (received, exceptions)."""
    params = {
        **_cohort_params(flow, as_of, windows),
        "field": field,
    }
    out: dict[str, dict[str, tuple[int, int]]] = {}
    for label, source, received, exc in conn.execute(_SOURCES_SQL, params).fetchall():
        out.setdefault(source, {})[label] = (received, exc)
    return out


def _cycle(conn: psycopg.Connection, flow: Workflow, windows: Sequence[Window]) -> dict[str, dict[str, Any]]:
    """label -> {"items": n, "total": stats, "stages": {stage: stats}}."""
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
            stages[stage.value] = {"p50": s50, "p95": s95, "mean": smean, "waited": waited}
        out[label] = {
            "items": items,
            "total": {"p50": p50, "p95": p95, "mean": mean, "waited": items},
            "stages": stages,
        }
    for w in windows:
        out.setdefault(
            w.label,
            {"items": 0, "total": _empty_stats(), "stages": {s.value: _empty_stats() for s in STAGES}},
        )
    return out


def _empty_stats() -> dict[str, Any]:
    return {"p50": None, "p95": None, "mean": None, "waited": 0}


def _queue_params(workflow: str, since: datetime, until: datetime) -> dict[str, Any]:
    return {"workflow": workflow, "review": REVIEW, "since": since, "until": until}


def _queue_at(
    conn: psycopg.Connection, workflow: str, times: Sequence[datetime], *, since: datetime, bound: timedelta
) -> list[tuple[int, float | None, int]]:
    """(size, oldest age in seconds, items older than bound) at each moment, in the order given."""
    distinct = sorted({utc(t) for t in times})  # a moment listed twice must not be counted twice
    params = {**_queue_params(workflow, since, distinct[-1]), "times": distinct, "bound": bound}
    rows = {
        t: (size, oldest, over) for t, size, oldest, over in conn.execute(_QUEUE_AT_SQL, params).fetchall()
    }
    return [rows[utc(t)] for t in times]


def measure(
    ledger: Ledger,
    workflow: str | Workflow,
    *,
    as_of: datetime | None = None,
    window_hours: float = 24,
    baseline_days: int = 7,
    source_field: str | None = None,
    queue_age_bound_hours: float = 24,
    top_sources: int = 5,
    oldest_items: int = 5,
    lookback_days: int = 30,
) -> dict[str, Any]:
    """Health of one workflow over the window ending at ``as_of``, against the previous days.

    :param ledger: the ledger to read.
    :param workflow: the workflow to measure.
    :param as_of: end of the window (default: now).
    :param window_hours: length of the window.
    :param baseline_days: how many earlier days (same window, shifted by whole days) to compare with.
    :param source_field: payload (or AI result) field that names an item's source; default: the
        workflow's declared ``source_field`` (none declared: no breakdown by source).
    :param queue_age_bound_hours: waits longer than this are counted as ``queue.over_bound``.
    :param top_sources: how many sources to list as driving the exception rate.
    :param oldest_items: how many of the longest-waiting items to list.
    :param lookback_days: review-queue stays that ended before this many days are not searched.
    """
    as_of = utc(as_of)
    flow = ledger.workflow(workflow)
    workflow, done = flow.name, flow.done
    window = timedelta(hours=window_hours)
    field = source_field or flow.source_field
    windows = comparison_windows(as_of, window, baseline_days)
    previous = windows[1:]
    pooled = [windows[0], *(Window("baseline", w.start, w.end) for w in previous)]
    bound = timedelta(hours=queue_age_bound_hours)
    since = as_of - max(timedelta(days=lookback_days), window + baseline_days * DAY)
    with ledger.connect() as conn:
        throughput = _throughput(conn, workflow, done, windows)
        exceptions = _exceptions(conn, flow, windows, as_of)
        sources = _sources(conn, flow, pooled, as_of, field) if field else {}
        received_by_status = dict(
            conn.execute(_COHORT_STATUS_SQL, _cohort_params(flow, as_of, windows[:1])).fetchall()
        )
        cycle = _cycle(conn, flow, pooled)
        moments = [as_of - window, *(as_of - d * DAY for d in range(baseline_days + 1))]
        queue_sizes = _queue_at(conn, workflow, moments, since=since, bound=bound)
        detail = conn.execute(
            _QUEUE_DETAIL_SQL, {**_queue_params(workflow, since, as_of), "oldest": oldest_items}
        ).fetchall()

    counts = [throughput.get(w.label, 0) for w in previous]
    current = throughput.get("current", 0)
    baseline = statistics.median(counts) if counts else None

    received, exc, approvals = exceptions["current"]
    base_received = sum(exceptions[w.label][0] for w in previous)
    base_exc = sum(exceptions[w.label][1] for w in previous)
    trend = [
        {
            "label": w.label,
            "start": w.start.isoformat(),
            "end": w.end.isoformat(),
            "received": exceptions[w.label][0],
            "exceptions": exceptions[w.label][1],
            "rate": _ratio(exceptions[w.label][1], exceptions[w.label][0]),
        }
        for w in reversed(windows)  # oldest first, current last
    ]
    source_rows: list[dict[str, Any]] = []
    for name, by_label in sources.items():
        now_received, now_exc = by_label.get("current", (0, 0))
        then_received, then_exc = by_label.get("baseline", (0, 0))
        source_rows.append(
            {
                "source": name,
                "received": now_received,
                "exceptions": now_exc,
                "rate": _ratio(now_exc, now_received),
                "baseline_received": then_received,
                "baseline_exceptions": then_exc,
                "baseline_rate": _ratio(then_exc, then_received),
            }
        )
    source_rows.sort(key=lambda r: (-r["exceptions"], -(r["rate"] or 0), r["source"]))

    window_start_size = queue_sizes[0][0]
    now_size, oldest_age, over = queue_sizes[1]
    previous_sizes = [size for size, _, _ in queue_sizes[2:]]
    by_status = {row[2]: int(row[3]) for row in detail if row[0] == "status"}
    oldest = [
        {"item_id": row[1], "status": row[2], "age_s": row[3], "reason": row[4], "run_id": row[5]}
        for row in detail
        if row[0] == "oldest"
    ]

    return {
        "workflow": workflow,
        "as_of": as_of.isoformat(),
        "window_hours": window_hours,
        "baseline_days": baseline_days,
        "done_status": done,
        "throughput": {
            "current": current,
            "previous": counts,
            "baseline": baseline,
            "change": (current / baseline - 1) if baseline else None,
            "received": received,
            "received_by_status": received_by_status,
        },
        "exceptions": {
            "received": received,
            "exceptions": exc,
            "rate": _ratio(exc, received),
            "baseline_received": base_received,
            "baseline_exceptions": base_exc,
            "baseline_rate": _ratio(base_exc, base_received),
            "approvals": approvals,
            "approval_rate": _ratio(approvals, received),
            "trend": trend,
            "source_field": field,
            "sources": source_rows[:top_sources],
        },
        "cycle": {
            "current": cycle["current"],
            "baseline": cycle["baseline"],
        },
        "queue": {
            "size": now_size,
            "oldest_age_s": oldest_age,
            "over_bound": over,
            "bound_s": bound.total_seconds(),
            "by_status": by_status,
            "oldest": oldest,
            "window_start_size": window_start_size,
            "previous_sizes": previous_sizes,
            "baseline_size": statistics.median(previous_sizes) if previous_sizes else None,
        },
    }


def series(
    ledger: Ledger,
    workflow: str | Workflow,
    *,
    as_of: datetime | None = None,
    days: float = 7,
    bucket_hours: float = 6,
    queue_age_bound_hours: float = 24,
    lookback_days: int = 30,
) -> dict[str, Any]:
    """The health numbers per time bucket, oldest first: what the health page charts.

    :param as_of: end of the last bucket (default: now).
    :param days: how far back the series reaches.
    :param bucket_hours: length of one bucket.
    """
    as_of = utc(as_of)
    flow = ledger.workflow(workflow)
    workflow, done = flow.name, flow.done
    buckets = bucket_windows(as_of, timedelta(days=days), timedelta(hours=bucket_hours))
    since = min(buckets[0].start, as_of - timedelta(days=lookback_days))
    bound = timedelta(hours=queue_age_bound_hours)
    with ledger.connect() as conn:
        throughput = _throughput(conn, workflow, done, buckets)
        exceptions = _exceptions(conn, flow, buckets, as_of)
        cycle = _cycle(conn, flow, buckets)
        queue = _queue_at(conn, workflow, [b.end for b in buckets], since=since, bound=bound)
    points = []
    for bucket, (size, oldest, over) in zip(buckets, queue, strict=True):
        received, exc, approvals = exceptions[bucket.label]
        bucket_cycle = cycle[bucket.label]
        points.append(
            {
                "start": bucket.start.isoformat(),
                "end": bucket.end.isoformat(),
                "throughput": throughput.get(bucket.label, 0),
                "received": received,
                "exceptions": exc,
                "exception_rate": _ratio(exc, received),
                "approvals": approvals,
                "cycle_items": bucket_cycle["items"],
                "cycle_p50": bucket_cycle["total"]["p50"],
                "cycle_p95": bucket_cycle["total"]["p95"],
                "stage_mean": {name: s["mean"] for name, s in bucket_cycle["stages"].items()},
                "stage_p95": {name: s["p95"] for name, s in bucket_cycle["stages"].items()},
                "queue_size": size,
                "queue_oldest_age_s": oldest,
                "queue_over_bound": over,
            }
        )
    return {
        "workflow": workflow,
        "as_of": as_of.isoformat(),
        "bucket_hours": bucket_hours,
        "done_status": done,
        "stages": list(STAGES),
        "points": points,
    }


def run_progress(
    ledger: Ledger,
    workflow: str | Workflow,
    *,
    run_id: str | None = None,
    limit: int = 20,
    as_of: datetime | None = None,
    lookback_days: int = 30,
) -> list[dict[str, Any]]:
    """Items done of items received per run, newest run first.

    :param run_id: only this run.
    :param limit: at most this many runs.
    :param lookback_days: runs that received their first item longer ago are not listed.
    """
    as_of = utc(as_of)
    flow = ledger.workflow(workflow)
    params = {
        "workflow": flow.name,
        "first": flow.first,
        "done": flow.done,
        "review": REVIEW,
        "stopped": STOPPED,
        "since": as_of - timedelta(days=lookback_days),
        "until": as_of,
        "run_id": run_id,
        "limit": limit,
    }
    with ledger.connect() as conn:
        rows = conn.execute(_RUNS_SQL, params).fetchall()
    return [
        {
            "run_id": run,
            "started": started.isoformat(),
            "received": received,
            "done": done,
            "in_review": in_review,
            "stopped": stopped,
            "in_flight": received - done - in_review - stopped,
            "progress": _ratio(done, received),
            "last_change": last.isoformat(),
        }
        for run, started, received, done, in_review, stopped, last in rows
    ]
