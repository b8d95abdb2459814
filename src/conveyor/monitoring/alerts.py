"""Alert rules: from one workflow's health snapshot (see :mod:`.metrics`) to the alerts it raises.

Each rule is a pure function of the snapshot and the workflow's :class:`Thresholds`, and each alert
says what moved, by how much, compared with what, and where to look. Whether an alert is actually
sent (or was already sent for the same condition) is decided by :mod:`.store`.

Rules (name: fires when):

* ``zero_output``: nothing completed in the window while the same window on earlier days usually
  completed at least ``zero_output_min_expected`` items;
* ``throughput_drop``: completions fell by ``throughput_drop_share`` (default 90%) or more against
  the median of the same window on the previous days (when that median is at least
  ``throughput_min_expected``);
* ``exception_rate``: the share of received items routed to review or quarantine exceeds
  ``exception_rate_bound`` (with at least ``exception_min_items`` received); names the sources;
* ``cycle_time``: the p95 of entry-to-completion grew by ``cycle_growth`` times and at least
  ``cycle_min_increase_minutes``; the subject is the bottleneck stage;
* ``queue_age``: items have waited for a person longer than ``queue_age_hours``;
* ``queue_growth``: the review queue holds ``queue_growth_factor`` times its usual size at this time
  of day (and at least ``queue_min_size`` items), with the model's time alongside;
* ``passed_error`` and ``passed_error_rise``: an AI step's answers that pass unreviewed are wrong too
  often, or more often than before, estimated from spot checks (:mod:`.accuracy_alerts`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from conveyor.monitoring.accuracy_alerts import evaluate_accuracy
from conveyor.monitoring.alert_model import RULES as RULES
from conveyor.monitoring.alert_model import Alert as Alert
from conveyor.monitoring.alert_model import Thresholds as Thresholds
from conveyor.monitoring.alert_model import links as links
from conveyor.monitoring.snapshot import Cycle, DurationStats, HealthSnapshot
from conveyor.monitoring.stages import STAGES, Stage

#: Where to look first when a stage is the bottleneck.
STAGE_HINTS: dict[str, str] = {
    Stage.GATE.value: "the validation gate task of the workflow's DAG (input size, suite run time)",
    Stage.MODEL.value: "the AI step: its task logs, the model connection's latency and errors, its breaker",
    Stage.REVIEW.value: "the review queue: who is staffing it (conveyor queue --workflow {workflow})",
    Stage.APPROVAL.value: "pending sign-offs in the Airflow UI (Required actions) for the workflow's runs",
    Stage.PUBLISH.value: (
        "the publish / payment step and its outbox (conveyor outbox --workflow {workflow}; what waits:"
        " conveyor items --workflow {workflow} --status approved)"
    ),
}


# -- formatting ------------------------------------------------------------------------------------


def fmt_duration(seconds: float | None) -> str:
    """A duration for people: ``45 s``, ``12 min``, ``3.5 h``, ``2.1 d``."""
    if seconds is None:
        return "n/a"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def fmt_share(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0%}"


def fmt_count(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:g}" if isinstance(value, float) else str(value)


# -- rules -----------------------------------------------------------------------------------------


def evaluate(snapshot: HealthSnapshot, thresholds: Thresholds, *, base_url: str = "") -> list[Alert]:
    """Every alert the snapshot raises under ``thresholds``.

    :param snapshot: one workflow's result of :func:`conveyor.monitoring.metrics.measure`.
    :param thresholds: that workflow's thresholds.
    :param base_url: the Airflow UI's base URL, for the links in the alert.
    """
    found: list[Alert | None] = [
        _throughput_rule(snapshot, thresholds, base_url),
        _exception_rule(snapshot, thresholds, base_url),
        _cycle_rule(snapshot, thresholds, base_url),
        _queue_age_rule(snapshot, thresholds, base_url),
        _queue_growth_rule(snapshot, thresholds, base_url),
    ]
    return [a for a in found if a is not None] + evaluate_accuracy(snapshot, thresholds, base_url=base_url)


def _throughput_rule(snap: HealthSnapshot, t: Thresholds, base_url: str) -> Alert | None:
    wf, tp = snap.workflow, snap.throughput
    current, baseline, previous = tp.current, tp.baseline, tp.previous
    if baseline is None:
        return None
    link = links(base_url, wf)
    days = len(previous)
    compared = (
        f"median {fmt_count(baseline)} over the same {snap.window} on each of the previous {days} days "
        f"(oldest to newest: {', '.join(str(c) for c in reversed(previous))})"
    )
    what = f"items that reached '{snap.done_status}' in the {snap.window} to {snap.when}: {current}"
    if current == 0 and baseline >= t.zero_output_min_expected:
        received = tp.received
        stuck = dict(tp.received_by_status)
        if received == 0:
            diagnosis = "no item was received in the window either: the input stopped arriving upstream"
        else:
            where_now = ", ".join(f"{status} {count}" for status, count in stuck.items())
            diagnosis = f"{received} items were received but none completed; they are now: {where_now}"
        return Alert(
            rule="zero_output",
            workflow=wf,
            severity="critical",
            title=f"{wf}: completed nothing in the last {snap.window} (usually {fmt_count(baseline)})",
            what=f"{what}. {diagnosis}",
            change=f"down 100% ({fmt_count(baseline)} -> 0)",
            compared_with=compared,
            where=(
                f"health page: {link['health']}",
                f"the DAG's recent runs: {link['dag']}",
                f"items received in the window and where they are: conveyor items --workflow {wf}",
            ),
            value=0,
            baseline=baseline,
            as_of=snap.when,
            detail={"received": received, "received_by_status": stuck},
        )
    drop = 1 - current / baseline if baseline else 0.0
    if baseline >= t.throughput_min_expected and drop >= t.throughput_drop_share:
        return Alert(
            rule="throughput_drop",
            workflow=wf,
            severity="critical",
            title=f"{wf}: throughput down {drop:.0%} "
            f"({current} vs a usual {fmt_count(baseline)} per {snap.window})",
            what=what,
            change=f"down {drop:.0%} ({fmt_count(baseline)} -> {current}); the declared bound is a drop of "
            f"{t.throughput_drop_share:.0%}",
            compared_with=compared,
            where=(
                f"health page: {link['health']}",
                f"the DAG's recent runs: {link['dag']}",
                f"where this window's items are: conveyor items --workflow {wf}",
            ),
            value=current,
            baseline=baseline,
            as_of=snap.when,
            detail={"drop": drop, "received": tp.received},
        )
    return None


def _exception_rule(snap: HealthSnapshot, t: Thresholds, base_url: str) -> Alert | None:
    wf, ex = snap.workflow, snap.exceptions
    rate = ex.rate
    if rate is None or ex.received < t.exception_min_items or rate <= t.exception_rate_bound:
        return None
    base = ex.baseline_rate
    trend = ", ".join(fmt_share(p.rate) for p in ex.trend)
    drivers = [s for s in ex.sources if s.exceptions > 0][:3]
    field_name = ex.source_field
    driver_text = "; ".join(
        f"{field_name} {s.source}: {s.exceptions} of {ex.exceptions} exceptions "
        f"({fmt_share(s.rate)} of its {s.received} items, was {fmt_share(s.baseline_rate)})"
        for s in drivers
    )
    link = links(base_url, wf)
    change = f"{fmt_share(base)} -> {fmt_share(rate)}"
    if base is not None:
        change += f" (+{(rate - base) * 100:.0f} points)"
    return Alert(
        rule="exception_rate",
        workflow=wf,
        severity="warning",
        title=f"{wf}: exception rate {fmt_share(rate)} ({ex.exceptions} of {ex.received} items), "
        f"was {fmt_share(base)}",
        what=f"of the {ex.received} items received in the {snap.window} to {snap.when}, "
        f"{ex.exceptions} went to review or quarantine",
        change=f"{change}; the declared bound is {fmt_share(t.exception_rate_bound)}",
        compared_with=f"{fmt_share(base)} ({ex.baseline_exceptions} of {ex.baseline_received}) "
        "over the "
        f"same window on the previous {snap.baseline_days} days; daily trend, oldest to now: {trend}",
        where=(
            f"driven by {driver_text}" if driver_text else f"no single {field_name} stands out",
            f"the exception queue: conveyor queue --workflow {wf}",
            f"health page: {link['health']}",
        ),
        value=rate,
        baseline=base,
        as_of=snap.when,
        detail={"sources": [dataclasses.asdict(s) for s in drivers]},
    )


def _stage_line(name: str, now: DurationStats, before: DurationStats) -> str:
    p_now, p_before = now.p95, before.p95
    if p_now is None or p_before is None:
        trend = ""
    elif abs(p_now - p_before) <= max(60.0, 0.2 * p_before):
        trend = ", flat"
    else:
        trend = f", {'+' if p_now > p_before else '-'}{fmt_duration(abs(p_now - p_before))}"
    return f"{name} p95 {fmt_duration(p_now)} (was {fmt_duration(p_before)}{trend})"


def bottleneck(cycle: Cycle) -> str | None:
    """The stage whose mean wait grew the most between the baseline and now (None if none grew)."""
    now, before = cycle.current.stages, cycle.baseline.stages
    growth = {
        s.value: (now[s.value].mean or 0.0) - (before[s.value].mean or 0.0)
        for s in STAGES
        if s.value in now
    }
    stage, grew = max(growth.items(), key=lambda kv: kv[1], default=(None, 0.0))
    return stage if grew > 0 else None


def _cycle_rule(snap: HealthSnapshot, t: Thresholds, base_url: str) -> Alert | None:
    wf, cycle = snap.workflow, snap.cycle
    now, before = cycle.current, cycle.baseline
    p_now, p_before = now.total.p95, before.total.p95
    if (
        now.items < t.cycle_min_items
        or before.items < t.cycle_min_items
        or p_now is None
        or p_before is None
    ):
        return None
    increase = p_now - p_before
    if p_now < t.cycle_growth * p_before or increase < t.cycle_min_increase_minutes * 60:
        return None
    stage = bottleneck(cycle) or "unknown"
    stages = "; ".join(
        _stage_line(s.value, now.stages[s.value], before.stages[s.value]) for s in STAGES
    )
    link = links(base_url, wf)
    hint = STAGE_HINTS.get(stage, "the workflow's DAG runs").format(workflow=wf)
    factor = p_now / p_before if p_before else float("inf")
    return Alert(
        rule="cycle_time",
        workflow=wf,
        severity="warning",
        subject=stage,
        title=f"{wf}: cycle time p95 {fmt_duration(p_now)} (was {fmt_duration(p_before)}); "
        f"bottleneck: {stage}",
        what=f"entry to completion of the {now.items} items completed in the {snap.window} to "
        f"{snap.when}: p50 {fmt_duration(now.total.p50)}, p95 {fmt_duration(p_now)}",
        change=f"p95 {factor:.1f}x (+{fmt_duration(increase)}); most of the added time is spent in {stage}",
        compared_with=f"p95 {fmt_duration(p_before)} (p50 {fmt_duration(before.total.p50)}) over the "
        f"{before.items} items completed in the same window on the previous {snap.baseline_days} days. "
        f"By stage: {stages}",
        where=(f"{stage}: {hint}", f"health page (cycle time by stage): {link['health']}"),
        value=p_now,
        baseline=p_before,
        as_of=snap.when,
        detail={"bottleneck": stage, "increase_s": increase},
    )


def _queue_age_rule(snap: HealthSnapshot, t: Thresholds, base_url: str) -> Alert | None:
    wf, q = snap.workflow, snap.queue
    if not q.over_bound:
        return None
    oldest = "; ".join(
        f"{item.item_id} ({item.status}, {fmt_duration(item.age_s)}"
        + (f", reason: {item.reason}" if item.reason else "")
        + ")"
        for item in q.oldest[:3]
    )
    link = links(base_url, wf)
    by_status = ", ".join(f"{status} {count}" for status, count in sorted(q.by_status.items()))
    first = q.oldest[0].item_id if q.oldest else "ITEM"
    return Alert(
        rule="queue_age",
        workflow=wf,
        severity="warning",
        title=f"{wf}: {q.over_bound} item(s) waiting for a person longer than "
        f"{fmt_duration(q.bound_s)}; "
        f"oldest {fmt_duration(q.oldest_age_s)}",
        what=f"items in the review queue at {snap.when}: {q.size} ({by_status}); "
        f"longest waiting: {oldest}",
        change=f"{q.over_bound} item(s) past the bound; "
        f"the oldest by {fmt_duration((q.oldest_age_s or q.bound_s) - q.bound_s)}",
        compared_with=f"the declared bound of {fmt_duration(q.bound_s)} in the queue (queue_age_hours "
        f"{t.queue_age_hours:g})",
        where=(
            f"the review queue: {link['review']} or conveyor queue --workflow {wf}",
            f"decide: conveyor review {first} --approve|--reject --by NAME",
            *_corrected_hint(q.by_status),
            f"health page: {link['health']}",
        ),
        value=q.oldest_age_s,
        baseline=q.bound_s,
        as_of=snap.when,
        detail={"oldest": [dataclasses.asdict(item) for item in q.oldest[:3]]},
    )


def _corrected_hint(by_status: Mapping[str, int]) -> tuple[str, ...]:
    """Corrected items wait for their run's review step, not for a person's decision."""
    if not by_status.get("corrected"):
        return ()
    return (
        f"{by_status['corrected']:g} corrected item(s) wait for their run's review step to validate them "
        "again; when that run has no review step waiting, clear its review step in Airflow "
        "(the run, the step, Clear) and it validates and processes them",
    )


def _queue_growth_rule(snap: HealthSnapshot, t: Thresholds, base_url: str) -> Alert | None:
    wf, q = snap.workflow, snap.queue
    size, usual = q.size, q.baseline_size or 0
    if size < t.queue_min_size or size < t.queue_growth_factor * usual:
        return None
    cycle = snap.cycle
    model = _stage_line("model", cycle.current.stages[Stage.MODEL.value], cycle.baseline.stages[Stage.MODEL.value])
    review = _stage_line(
        "review", cycle.current.stages[Stage.REVIEW.value], cycle.baseline.stages[Stage.REVIEW.value]
    )
    link = links(base_url, wf)
    previous = ", ".join(str(s) for s in reversed(q.previous_sizes))
    return Alert(
        rule="queue_growth",
        workflow=wf,
        severity="warning",
        title=f"{wf}: review queue at {size} items, usually {fmt_count(usual)} at this time of day",
        what=f"items waiting for a person at {snap.when}: {size} "
        f"({q.window_start_size} at the start of the {snap.window} window)",
        change=f"+{size - usual:g} items ({'new' if not usual else f'{size / usual:.1f}x'}); "
        "the declared bound is "
        f"{t.queue_growth_factor:g}x the usual size and at least {t.queue_min_size} items",
        compared_with=f"median {fmt_count(usual)} at the same time on the previous "
        f"{len(q.previous_sizes)} days "
        f"(oldest to newest: {previous}). Time per item: {model}; {review}",
        where=(
            f"the review queue, not the model: {link['review']} or conveyor queue --workflow {wf}",
            f"health page (queue size and age): {link['health']}",
        ),
        value=size,
        baseline=usual,
        as_of=snap.when,
        detail={"window_start_size": q.window_start_size},
    )
