"""What an alert is: the rules' names, a workflow's thresholds, one alert condition, its links.

Shared by the rules of :mod:`.alerts` (throughput, exceptions, cycle time, queue) and of
:mod:`.accuracy_alerts` (the AI steps' measured error), which :func:`.alerts.evaluate` runs too: a
module of its own, so neither rule module has to import the other's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any
from urllib.parse import quote

RULES: tuple[str, ...] = (
    "zero_output",
    "throughput_drop",
    "exception_rate",
    "cycle_time",
    "queue_age",
    "queue_growth",
    "passed_error",
    "passed_error_rise",
)

@dataclass(frozen=True)
class Thresholds:
    """The declared bounds of one workflow's health (see the module docstring for each rule).

    :param window_hours: the measured window, ending at the evaluation time.
    :param baseline_days: the window is compared with the same window on this many earlier days.
    :param source_field: payload field naming an item's source (None: the workflow's declared one).
    :param renotify_hours: a condition still firing is re-sent after this long, not every hour.
    :param resolve_after_hours: a condition must stay clear this long before it counts as resolved.
    """

    window_hours: float = 24
    baseline_days: int = 7
    source_field: str | None = None
    zero_output_min_expected: float = 1
    throughput_drop_share: float = 0.9
    throughput_min_expected: float = 10
    exception_rate_bound: float = 0.15
    exception_min_items: int = 20
    cycle_growth: float = 1.5
    cycle_min_items: int = 10
    cycle_min_increase_minutes: float = 30
    queue_age_hours: float = 24
    queue_growth_factor: float = 3
    queue_min_size: int = 10
    renotify_hours: float = 24
    resolve_after_hours: float = 2
    #: the period of the AI steps' error estimate (and of the one it is compared with)
    accuracy_days: float = 7
    #: decided spot checks below which the estimate raises no alert
    accuracy_min_spot_checks: int = 20
    #: significance of a rise of the error rate against the previous period
    accuracy_rise_p: float = 0.01

    @classmethod
    def for_workflow(
        cls, config: Mapping[str, Mapping[str, Any]], workflow: str, declared: Mapping[str, Any] | None = None
    ) -> Thresholds:
        """The thresholds of ``workflow``: the ``"*"`` entry, then the workflow's declared thresholds
        (:class:`~conveyor.workflow.Workflow`), then the workflow's own entry of ``config``.

        :param config: ``{"*": {...}, "<workflow>": {...}}``; unknown keys are an error (a typo
            would otherwise silently leave a default in place).
        :param declared: the thresholds the workflow's declaration carries.
        """
        merged = {**config.get("*", {}), **(declared or {}), **config.get(workflow, {})}
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(merged) - known)
        if unknown:
            raise ValueError(f"unknown threshold(s) for workflow {workflow!r}: {', '.join(unknown)}")
        return cls(**merged)


@dataclass(frozen=True)
class Alert:
    """One alert condition found in one evaluation.

    :param rule: one of :data:`RULES`.
    :param subject: what inside the workflow the condition is about ('' = the whole workflow; the
        bottleneck stage for ``cycle_time``). Part of the de-duplication key.
    :param what: what moved (the measured number, in words).
    :param change: by how much.
    :param compared_with: against what.
    :param where: where to look (links and commands), most useful first.
    """

    rule: str
    workflow: str
    severity: str
    title: str
    what: str
    change: str
    compared_with: str
    where: tuple[str, ...]
    subject: str = ""
    value: float | None = None
    baseline: float | None = None
    as_of: str = ""
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.workflow, self.rule, self.subject)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["where"] = list(self.where)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Alert:
        values = {f.name: data[f.name] for f in fields(cls) if f.name in data}
        values["where"] = tuple(values.get("where", ()))
        return cls(**values)


def links(base_url: str, workflow: str) -> dict[str, str]:
    """The health and review pages, and the workflow's DAG in the Airflow UI (DAG ids are workflow names)."""
    base = base_url.rstrip("/")
    return {
        "health": f"{base}/conveyor/health?workflow={quote(workflow)}",
        "review": f"{base}/conveyor/review/?workflow={quote(workflow)}",
        "dag": f"{base}/dags/{quote(workflow)}",
    }
