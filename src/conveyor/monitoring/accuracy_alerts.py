"""Alert rules on the measured guardrail (see :mod:`.accuracy`): is what passes unreviewed wrong too often?

Two rules per AI step, pure functions of a health snapshot's ``accuracy`` entry (put there by
:func:`accuracy_snapshot` when ``workflow_health`` measures) and the workflow's thresholds:

* ``passed_error``: the 95% upper bound of the error rate of the answers that passed unreviewed
  exceeds the step's declared ``max_error_rate``, with at least ``accuracy_min_spot_checks`` decided
  spot checks (fewer say too little either way). Critical when even the lower bound is above the
  target (it is surely over), a warning when the spot checks cannot show it is under;
* ``passed_error_rise``: the error rate rose significantly against the previous period (one-sided
  Fisher exact test, ``p < accuracy_rise_p``): the model getting quietly worse, caught before the
  month's reports are wrong, whether or not a target is declared.

Each alert carries the numbers and the command to look further (``conveyor accuracy``).
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import TYPE_CHECKING

from conveyor.monitoring.accuracy import StepAccuracy, rise_p_value
from conveyor.monitoring.alert_model import Alert, Thresholds, links
from conveyor.monitoring.snapshot import AccuracyComparison, AccuracyPeriod

if TYPE_CHECKING:
    from conveyor.ledger.store import Ledger
    from conveyor.monitoring.snapshot import HealthSnapshot

def _kept(estimate: StepAccuracy) -> AccuracyPeriod:
    """What a snapshot keeps of one period's estimate: the fields :class:`AccuracyPeriod` names."""
    return AccuracyPeriod(**{f.name: getattr(estimate, f.name) for f in dataclasses.fields(AccuracyPeriod)})


def accuracy_snapshot(
    ledger: Ledger, workflow: str, *, as_of: datetime, days: float
) -> tuple[AccuracyComparison, ...]:
    """Each AI step's estimate for the ``days`` to ``as_of`` and the period before, for a health snapshot."""
    from conveyor.monitoring.accuracy_reads import workflow_accuracy

    return tuple(
        AccuracyComparison(step=p.now.step, days=days, now=_kept(p.now), before=_kept(p.before))
        for p in workflow_accuracy(ledger, workflow, days=days, as_of=as_of)
    )


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def _look_further(wf: str, step: str, now: AccuracyPeriod, base_url: str) -> tuple[str, ...]:
    link = links(base_url, wf)
    recommended = now.recommended_min_confidence
    advice = (
        f"the threshold that meets the target: min_confidence={recommended:.2f} (sends "
        f"{_pct(now.recommended_review_share)} to review; now {now.min_confidence}); "
        "a person changes it in the DAG"
        if recommended is not None
        else "no threshold meets the target on these spot checks: review more (raise spot_check) or look at the model"
    )
    return (
        f"the estimate and the threshold curve: conveyor accuracy --workflow {wf} --step {step}",
        advice,
        f"what reviewers corrected: conveyor queue --workflow {wf}; review page {link['review']}",
        f"health page (threshold curve): {link['health']}",
    )


def _numbers(part: AccuracyPeriod) -> str:
    return (
        f"{_pct(part.passed_error_rate)} ({part.spot_wrong} of {part.spot_checked} spot checks wrong; "
        f"95% bounds {_pct(part.passed_error_lower)} to {_pct(part.passed_error_upper)})"
    )


def evaluate_accuracy(snapshot: HealthSnapshot, t: Thresholds, *, base_url: str = "") -> list[Alert]:
    """The accuracy alerts of one workflow's snapshot (none when it carries no ``accuracy``)."""
    found: list[Alert] = []
    wf, when = snapshot.workflow, snapshot.when
    for entry in snapshot.accuracy:
        step, now, before, days = entry.step, entry.now, entry.before, entry.days
        if now.spot_checked < t.accuracy_min_spot_checks:
            continue
        period = f"the {days:g} days to {when}"
        compared = f"the {days:g} days before: {_numbers(before)}"
        target = now.max_error_rate
        detail = {"step": step, "now": dataclasses.asdict(now), "before": dataclasses.asdict(before)}
        if target is not None and now.passed_error_upper > target:
            sure = now.passed_error_lower > target
            found.append(Alert(
                rule="passed_error", workflow=wf, subject=step, severity="critical" if sure else "warning",
                title=f"{wf} / {step}: answers passing unreviewed are wrong up to {_pct(now.passed_error_upper)} "
                      f"(target {_pct(target)})",
                what=f"of the {now.passed} answers that passed {step} unreviewed in {period}, an estimated "
                     f"{_numbers(now)}",
                change=f"the 95% upper bound {_pct(now.passed_error_upper)} is above the declared max_error_rate "
                       f"{_pct(target)}" + ("; even the lower bound is above it" if sure else
                                            "; the spot checks cannot show it is under"),
                compared_with=compared, where=_look_further(wf, step, now, base_url),
                value=now.passed_error_upper, baseline=target, as_of=when, detail=detail,
            ))  # fmt: skip
        if before.spot_checked >= t.accuracy_min_spot_checks and (now.passed_error_rate or 0) > (
            before.passed_error_rate or 0
        ):
            p = rise_p_value((before.spot_wrong, before.spot_checked), (now.spot_wrong, now.spot_checked))
            if p < t.accuracy_rise_p:
                found.append(Alert(
                    rule="passed_error_rise", workflow=wf, subject=step, severity="warning",
                    title=f"{wf} / {step}: error of unreviewed answers rose to {_pct(now.passed_error_rate)} "
                          f"from {_pct(before.passed_error_rate)}",
                    what=f"answers that passed {step} unreviewed in {period}: an estimated {_numbers(now)}",
                    change=f"{_pct(before.passed_error_rate)} -> {_pct(now.passed_error_rate)}; significant "
                           f"(one-sided Fisher exact p = {p:.2g}, bound {t.accuracy_rise_p:g}): the model may be "
                           "getting worse",
                    compared_with=compared, where=_look_further(wf, step, now, base_url),
                    value=now.passed_error_rate, baseline=before.passed_error_rate, as_of=when,
                    detail={**detail, "p_value": p},
                ))  # fmt: skip
    return found
