"""Workflow health measured from the ledger's audit trail, with set-based SQL.

Every number is computed from ``conveyor.transitions`` (one row per status change, with its time;
the statements live in :mod:`conveyor.ledger.metric_reads`),
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

``measure`` returns a typed :class:`~conveyor.monitoring.snapshot.HealthSnapshot` (its
``as_xcom()`` is the JSON); the chart series and run progress are plain JSON-ready dicts (ISO
timestamps, seconds as floats).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from conveyor.ledger import metric_reads as reads
from conveyor.ledger import queue_history
from conveyor.ledger.metric_reads import EXCEPTIONS, REVIEW, STOPPED, Window
from conveyor.ledger.store import Ledger
from conveyor.monitoring.snapshot import (
    Cycle,
    CycleTimes,
    DurationStats,
    Exceptions,
    HealthSnapshot,
    Queue,
    SourceRate,
    Throughput,
    TrendPoint,
    WaitingItem,
)
from conveyor.monitoring.stages import STAGES
from conveyor.workflow import Workflow

__all__ = [
    "DAY", "EXCEPTIONS", "REVIEW", "STOPPED", "Window", "active_workflows", "bucket_windows",
    "comparison_windows", "measure", "run_progress", "series", "utc",
]

DAY = timedelta(days=1)


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


def _ratio(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def active_workflows(ledger: Ledger, *, since: datetime) -> list[str]:
    """Workflows in the ledger with any status change since ``since``."""
    with ledger.connect() as conn:
        return reads.active_workflows(conn, since=since)


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
) -> HealthSnapshot:
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
        throughput = reads.throughput(conn, workflow, done, windows)
        exceptions = reads.exceptions(conn, flow, windows, as_of)
        sources = reads.sources(conn, flow, pooled, as_of, field) if field else {}
        received_by_status = reads.received_by_status(conn, flow, windows[0], as_of)
        cycle = reads.cycle(conn, flow, pooled)
        moments = [as_of - window, *(as_of - d * DAY for d in range(baseline_days + 1))]
        queue_sizes = queue_history.queue_at(conn, workflow, [utc(t) for t in moments], since=since, bound=bound)
        detail = queue_history.queue_detail(conn, workflow, since=since, until=as_of, oldest=oldest_items)

    counts = [throughput.get(w.label, 0) for w in previous]
    current = throughput.get("current", 0)
    baseline = statistics.median(counts) if counts else None

    received, exc, approvals = exceptions["current"]
    base_received = sum(exceptions[w.label][0] for w in previous)
    base_exc = sum(exceptions[w.label][1] for w in previous)
    trend = tuple(
        TrendPoint(
            label=w.label,
            start=w.start.isoformat(),
            end=w.end.isoformat(),
            received=exceptions[w.label][0],
            exceptions=exceptions[w.label][1],
            rate=_ratio(exceptions[w.label][1], exceptions[w.label][0]),
        )
        for w in reversed(windows)  # oldest first, current last
    )
    source_rates = []
    for name, by_label in sources.items():
        now_received, now_exc = by_label.get("current", (0, 0))
        then_received, then_exc = by_label.get("baseline", (0, 0))
        source_rates.append(
            SourceRate(
                source=name,
                received=now_received,
                exceptions=now_exc,
                rate=_ratio(now_exc, now_received),
                baseline_received=then_received,
                baseline_exceptions=then_exc,
                baseline_rate=_ratio(then_exc, then_received),
            )
        )
    source_rates.sort(key=lambda r: (-r.exceptions, -(r.rate or 0), r.source))

    window_start_size = queue_sizes[0][0]
    now_size, oldest_age, over = queue_sizes[1]
    previous_sizes = tuple(size for size, _, _ in queue_sizes[2:])

    return HealthSnapshot(
        workflow=workflow,
        as_of=as_of,
        window_hours=window_hours,
        baseline_days=baseline_days,
        done_status=done,
        throughput=Throughput(
            current=current,
            previous=tuple(counts),
            baseline=baseline,
            change=(current / baseline - 1) if baseline else None,
            received=received,
            received_by_status=received_by_status,
        ),
        exceptions=Exceptions(
            received=received,
            exceptions=exc,
            rate=_ratio(exc, received),
            baseline_received=base_received,
            baseline_exceptions=base_exc,
            baseline_rate=_ratio(base_exc, base_received),
            approvals=approvals,
            approval_rate=_ratio(approvals, received),
            trend=trend,
            source_field=field,
            sources=tuple(source_rates[:top_sources]),
        ),
        cycle=Cycle(current=cycle_times(cycle["current"]), baseline=cycle_times(cycle["baseline"])),
        queue=Queue(
            size=now_size,
            oldest_age_s=oldest_age,
            over_bound=over,
            bound_s=bound.total_seconds(),
            by_status=detail.by_status,
            oldest=tuple(WaitingItem(**item) for item in detail.oldest),
            window_start_size=window_start_size,
            previous_sizes=previous_sizes,
            baseline_size=statistics.median(previous_sizes) if previous_sizes else None,
        ),
    )


def cycle_times(read: Mapping[str, Any]) -> CycleTimes:
    """One window's cycle times as :func:`conveyor.ledger.metric_reads.cycle` read them."""
    return CycleTimes(
        items=read["items"],
        total=DurationStats(**read["total"]),
        stages={stage: DurationStats(**stats) for stage, stats in read["stages"].items()},
    )


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
        throughput = reads.throughput(conn, workflow, done, buckets)
        exceptions = reads.exceptions(conn, flow, buckets, as_of)
        cycle = reads.cycle(conn, flow, buckets)
        queue = queue_history.queue_at(conn, workflow, [utc(b.end) for b in buckets], since=since, bound=bound)
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
    with ledger.connect() as conn:
        runs = reads.run_counts(
            conn, flow, run_id=run_id, limit=limit, since=as_of - timedelta(days=lookback_days), until=as_of
        )
    return [
        {
            "run_id": r.run_id,
            "started": r.started.isoformat(),
            "received": r.received,
            "done": r.done,
            "in_review": r.in_review,
            "stopped": r.stopped,
            "in_flight": r.received - r.done - r.in_review - r.stopped,
            "progress": _ratio(r.done, r.received),
            "last_change": r.last_change.isoformat(),
        }
        for r in runs
    ]
