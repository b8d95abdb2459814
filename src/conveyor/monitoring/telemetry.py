"""Health numbers emitted through Airflow's metrics (StatsD or OpenTelemetry), from inside tasks.

Airflow's task runner initialises ``airflow.sdk.observability.stats`` from the ``[metrics]`` config, so
whatever backend the deployment uses (StatsD, DogStatsD, OTLP) receives these without Conveyor
knowing which. The workflow is part of each name (plain StatsD drops tags) and also a tag.

Names (prefixed by Airflow's ``statsd_prefix`` / ``otel_prefix``, ``airflow`` by default):

* gauges ``conveyor.<workflow>.throughput``, ``.throughput_baseline``, ``.received``, ``.exceptions``,
  ``.exception_rate``, ``.cycle_items``, ``.cycle_p50_s``, ``.cycle_p95_s``,
  ``.stage.<stage>.p95_s``, ``.stage.<stage>.mean_s``, ``.queue_size``, ``.queue_oldest_age_s``,
  ``.queue_over_bound``;
* counters ``conveyor.<workflow>.alerts.<rule>`` and ``conveyor.alerts_sent`` per notification sent;
* timing ``conveyor.health.measure`` (how long measuring every workflow took).
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conveyor.monitoring.snapshot import HealthSnapshot


def _name(workflow: str) -> str:
    from airflow.sdk.observability.stats import normalize_name_for_stats

    return normalize_name_for_stats(workflow, log_warning=False)


def health_gauges(snapshot: HealthSnapshot) -> dict[str, float]:
    """The gauges of one workflow's snapshot, name -> value (None values are left out)."""
    wf = f"conveyor.{_name(snapshot.workflow)}"
    tp, ex, q = snapshot.throughput, snapshot.exceptions, snapshot.queue
    now = snapshot.cycle.current
    values: dict[str, float | None] = {
        f"{wf}.throughput": tp.current,
        f"{wf}.throughput_baseline": tp.baseline,
        f"{wf}.received": ex.received,
        f"{wf}.exceptions": ex.exceptions,
        f"{wf}.exception_rate": ex.rate,
        f"{wf}.cycle_items": now.items,
        f"{wf}.cycle_p50_s": now.total.p50,
        f"{wf}.cycle_p95_s": now.total.p95,
        f"{wf}.queue_size": q.size,
        f"{wf}.queue_oldest_age_s": q.oldest_age_s,
        f"{wf}.queue_over_bound": q.over_bound,
    }
    for stage, stats in now.stages.items():
        values[f"{wf}.stage.{stage}.p95_s"] = stats.p95
        values[f"{wf}.stage.{stage}.mean_s"] = stats.mean
    return {name: float(value) for name, value in values.items() if value is not None}


def emit_health(snapshot: HealthSnapshot) -> int:
    """Send one workflow's gauges; returns how many were sent."""
    from airflow.sdk.observability import stats

    tags = {"workflow": snapshot.workflow}
    gauges = health_gauges(snapshot)
    for name, value in gauges.items():
        stats.gauge(name, value, tags=tags)
    return len(gauges)


def emit_measure_time(elapsed: timedelta) -> None:
    """How long the measurement took (a slow ledger query shows up here before it hurts)."""
    from airflow.sdk.observability import stats

    stats.timing("conveyor.health.measure", elapsed)


def count_alert(workflow: str, rule: str) -> None:
    """One notification sent."""
    from airflow.sdk.observability import stats

    tags = {"workflow": workflow, "rule": rule}
    stats.incr(f"conveyor.{_name(workflow)}.alerts.{rule}", tags=tags)
    stats.incr("conveyor.alerts_sent", tags=tags)
