"""One workflow's health at a moment, as typed values: what :func:`.metrics.measure` returns.

The snapshot crosses three boundaries: the ``measure_health`` task hands it to ``evaluate_health``
through XCom, the monitoring store keeps it as JSON, and the API and ``conveyor metrics --json``
print it. :meth:`HealthSnapshot.as_xcom` is its one JSON shape (pinned by
``tests/test_xcom_shapes.py``) and :meth:`HealthSnapshot.from_xcom` reads it back, so the alert
rules, the gauges and the CLI read attributes a type checker follows, never string keys.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from conveyor.monitoring.stages import STAGES


@dataclass(frozen=True)
class DurationStats:
    """Seconds spent (in one stage, or entry to completion) by the items completed in a window.

    :param waited: how many of them spent time there (a stage an item skipped is not averaged in).
    """

    p50: float | None = None
    p95: float | None = None
    mean: float | None = None
    waited: int = 0


@dataclass(frozen=True)
class CycleTimes:
    """Entry to completion of the items completed in a window, in total and per stage."""

    items: int = 0
    total: DurationStats = DurationStats()
    stages: Mapping[str, DurationStats] = field(default_factory=lambda: {s.value: DurationStats() for s in STAGES})


@dataclass(frozen=True)
class Cycle:
    """This window's cycle times beside the same window on the previous days, pooled."""

    current: CycleTimes = CycleTimes()
    baseline: CycleTimes = CycleTimes()


@dataclass(frozen=True)
class Throughput:
    """Items that reached the done status in the window, against the same window on earlier days.

    :param previous: completions in the same window on each previous day, newest first.
    :param baseline: the median of ``previous`` (None without previous days).
    :param change: ``current / baseline - 1`` (None without a baseline).
    :param received_by_status: where the items received in the window are now.
    """

    current: int = 0
    previous: tuple[int, ...] = ()
    baseline: float | None = None
    change: float | None = None
    received: int = 0
    received_by_status: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class TrendPoint:
    """The exception rate of one day's window (``label`` is ``current`` or ``d-N``)."""

    label: str
    start: str
    end: str
    received: int
    exceptions: int
    rate: float | None


@dataclass(frozen=True)
class SourceRate:
    """The exceptions of one source (the value of the workflow's ``source_field``), now and before."""

    source: str
    received: int
    exceptions: int
    rate: float | None
    baseline_received: int
    baseline_exceptions: int
    baseline_rate: float | None


@dataclass(frozen=True)
class Exceptions:
    """Items of the window routed to review or quarantine, with their trend and the sources driving them.

    :param trend: one point per day's window, oldest first, this window last.
    :param sources: the sources with the most exceptions, most first.
    """

    received: int = 0
    exceptions: int = 0
    rate: float | None = None
    baseline_received: int = 0
    baseline_exceptions: int = 0
    baseline_rate: float | None = None
    approvals: int = 0
    approval_rate: float | None = None
    trend: tuple[TrendPoint, ...] = ()
    source_field: str | None = None
    sources: tuple[SourceRate, ...] = ()


@dataclass(frozen=True)
class WaitingItem:
    """One of the items waiting longest for a person."""

    item_id: str
    status: str
    age_s: float
    reason: str | None = None
    run_id: str | None = None


@dataclass(frozen=True)
class Queue:
    """The review queue at the end of the window, and at the same moment on the previous days.

    :param over_bound: items waiting longer than ``bound_s``.
    :param oldest: the longest waits, oldest first.
    :param previous_sizes: its size at the same moment on each previous day, newest first.
    """

    size: int = 0
    oldest_age_s: float | None = None
    over_bound: int = 0
    bound_s: float = 24 * 3600.0
    by_status: Mapping[str, int] = field(default_factory=dict)
    oldest: tuple[WaitingItem, ...] = ()
    window_start_size: int = 0
    previous_sizes: tuple[int, ...] = ()
    baseline_size: float | None = None


@dataclass(frozen=True)
class AccuracyPeriod:
    """What a snapshot keeps of one AI step's accuracy estimate over one period (see :mod:`.accuracy`)."""

    answers: int
    passed: int
    spot_checked: int
    spot_wrong: int
    passed_error_rate: float | None
    passed_error_upper: float
    passed_error_lower: float
    exception_rate: float | None
    max_error_rate: float | None
    min_confidence: float | None
    recommended_min_confidence: float | None
    recommended_review_share: float | None


@dataclass(frozen=True)
class AccuracyComparison:
    """One AI step's error of what passed unreviewed: the ``days`` to the snapshot and the period before."""

    step: str
    days: float
    now: AccuracyPeriod
    before: AccuracyPeriod


@dataclass(frozen=True)
class HealthSnapshot:
    """One workflow's health over the window ending at ``as_of``.

    Every section defaults to a window where nothing happened, so an alert rule of your own is
    tested on a snapshot that names only the numbers it reads.

    :param done_status: the status that counts as completed (the workflow's last).
    :param accuracy: each AI step's estimate, when ``workflow_health`` measured it.
    """

    workflow: str
    as_of: datetime
    done_status: str
    window_hours: float = 24
    baseline_days: int = 7
    throughput: Throughput = Throughput()
    exceptions: Exceptions = Exceptions()
    cycle: Cycle = Cycle()
    queue: Queue = Queue()
    accuracy: tuple[AccuracyComparison, ...] = ()

    @property
    def when(self) -> str:
        """``as_of`` as the alerts and the JSON say it (ISO 8601)."""
        return self.as_of.isoformat()

    @property
    def window(self) -> str:
        """The window's length for people: ``24 h``."""
        return f"{self.window_hours:g} h"

    def as_xcom(self) -> dict[str, Any]:
        """The snapshot as plain JSON (lists, not tuples; ``as_of`` in ISO 8601)."""
        plain: dict[str, Any] = _plain(dataclasses.asdict(self))
        return plain

    @classmethod
    def from_xcom(cls, data: Mapping[str, Any]) -> HealthSnapshot:
        """The snapshot :meth:`as_xcom` wrote (XCom, the monitoring store, the API's JSON)."""
        # pydantic (Airflow's own dependency) validates nested stdlib dataclasses; keys it does not know are ignored
        from pydantic import TypeAdapter

        return TypeAdapter(cls).validate_python(data)


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value
