"""The measured guardrail of a workflow's AI steps, read from the ledger (see :mod:`.accuracy`).

One period ends at ``as_of`` and spans ``days``; the previous period is the same span before it
(what ``workflow_health`` compares to see a model getting quietly worse). Answers count in the
period their step committed them (tallies) or routed them to review (labels).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from conveyor.errors import MonitoringError
from conveyor.ledger.store import Ledger
from conveyor.monitoring.accuracy import StepAccuracy, estimate
from conveyor.monitoring.metrics import utc


class UnknownStep(MonitoringError, LookupError):
    """No AI step of that name recorded anything for the workflow."""


@dataclass(frozen=True)
class StepPeriods:
    """One AI step's measured guardrail now and in the period before."""

    now: StepAccuracy
    before: StepAccuracy


def step_accuracy(
    ledger: Ledger, workflow: str, step: str, *, since: datetime, until: datetime
) -> StepAccuracy:
    """One step's estimate over ``[since, until)``."""
    tallies = ledger.ai_tallies(workflow, since=since, until=until, step=step)
    labels = ledger.answer_labels(workflow, since=since, until=until, step=step)
    if not tallies:  # a quiet period still has its declared target: the step's last one
        earlier = ledger.ai_tallies(workflow, since=datetime(1970, 1, 1, tzinfo=since.tzinfo), until=until, step=step)
        target = earlier[-1].max_error_rate if earlier else None
        return estimate(tallies, labels, workflow=workflow, step=step, since=since, until=until, max_error_rate=target)
    return estimate(tallies, labels, workflow=workflow, step=step, since=since, until=until)


def workflow_accuracy(
    ledger: Ledger,
    workflow: str,
    *,
    step: str | None = None,
    days: float = 7,
    as_of: datetime | str | None = None,
) -> list[StepPeriods]:
    """Every AI step of ``workflow`` (or ``step``), this period and the one before.

    :raises UnknownStep: ``step`` never recorded a tally in ``workflow``; names the known ones.
    """
    until = utc(as_of)
    span = timedelta(days=days)
    steps = ledger.ai_steps(workflow)
    if step is not None:
        if step not in steps:
            known = ", ".join(steps) or "none yet (a step records once it ran)"
            raise UnknownStep(f"no AI step {step!r} of workflow {workflow!r} recorded answers; known: {known}")
        steps = [step]
    return [
        StepPeriods(
            now=step_accuracy(ledger, workflow, name, since=until - span, until=until),
            before=step_accuracy(ledger, workflow, name, since=until - 2 * span, until=until - span),
        )
        for name in steps
    ]


#: What a report keeps of the previous period, beside this one.
_PREVIOUS = (
    "since", "until", "answers", "spot_checked", "spot_wrong", "passed_error_rate", "passed_error_upper",
    "exception_rate",
)  # fmt: skip


def accuracy_report(
    ledger: Ledger, workflow: str, *, step: str | None = None, days: float = 7, as_of: datetime | str | None = None
) -> dict[str, Any]:
    """The JSON of ``conveyor accuracy`` and of the health page's threshold curve."""
    until = utc(as_of)
    steps = []
    for periods in workflow_accuracy(ledger, workflow, step=step, days=days, as_of=until):
        data = periods.now.as_json()
        data["previous"] = {k: v for k, v in periods.before.as_json().items() if k in _PREVIOUS}
        steps.append(data)
    return {"workflow": workflow, "as_of": until.isoformat(), "days": days, "steps": steps}
