"""The AI step's settings for one run: the operator's parameters, resolved and checked once.

:class:`StepConfig` is what :class:`~conveyor.ai.operators.AIStepOperator` hands the engine
(:mod:`conveyor.ai.runner`); the spot checks' seed is derived here, from the workflow, the run and
the step, so every retry of a run draws the same items.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from conveyor.ai.definitions import AITask
from conveyor.ai.models.resolve import LOCAL
from conveyor.ai.retries import RetryPolicy
from conveyor.ai.spot_checks import DEFAULT_MAX_ERROR_RATE, DEFAULT_SPOT_CHECK, check_settings, spot_seed
from conveyor.ledger.leases import Holder


@dataclass
class StepConfig:
    """Everything one run of the step needs (the operator's parameters, resolved).

    See :class:`~conveyor.ai.operators.AIStepOperator` for the meaning of each field.
    """

    workflow: str
    run_id: str
    task: AITask
    actor: str
    from_status: str | None = None
    to_status: str | None = None
    model: Any = LOCAL
    fallback_model: Any = None
    min_confidence: float = 0.7
    max_failure_rate: float = 0.1
    #: share of the answers that passed every check sent to review anyway (see ``conveyor.ai.spot_checks``)
    spot_check: float = DEFAULT_SPOT_CHECK
    #: the declared target of the error rate of what passes unreviewed (None: none declared)
    max_error_rate: float | None = DEFAULT_MAX_ERROR_RATE
    batch_size: int = 200
    max_concurrency: int = 8
    breaker_threshold: int = 5
    breaker_cooldown: float = 60.0
    breaker_poll_interval: float = 1.0
    call_timeout: float = 30.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    confidence_method: str = "logprobs"
    samples: int = 3
    repair_attempts: int = 1
    items_per_call: int = 1
    step: str | None = None
    #: sharded: the task instance whose leases these are (None: the whole run in this process)
    holder: Holder | None = None
    #: sharded: the shard's own label, shown in the summary (e.g. its ``shard`` expand value)
    shard: Any = None
    #: sharded: seconds a claimed chunk stays this holder's without renewal
    lease_seconds: float = 300.0
    #: sharded: seconds between looks at the siblings' live leases once nothing is left to claim
    sibling_poll_interval: float = 1.0
    #: the spot checks' draw in this run (derived from the workflow, the run and the step)
    seed: str = field(init=False, default="")

    def __post_init__(self) -> None:
        self.from_status = self.from_status or self.task.from_status
        self.to_status = self.to_status or self.task.to_status
        self.step = self.step or self.task.name
        check_step_settings(
            min_confidence=self.min_confidence,
            max_failure_rate=self.max_failure_rate,
            batch_size=self.batch_size,
            max_concurrency=self.max_concurrency,
            items_per_call=self.items_per_call,
            lease_seconds=self.lease_seconds,
            spot_check=self.spot_check,
            max_error_rate=self.max_error_rate,
        )
        self.seed = spot_seed(self.workflow, self.run_id, self.step)


def check_step_settings(
    *,
    min_confidence: float,
    max_failure_rate: float,
    batch_size: int,
    max_concurrency: int,
    items_per_call: int | str,
    lease_seconds: float,
    spot_check: float,
    max_error_rate: float | None,
) -> None:
    """Refuse a setting no run could use, naming it: the operator calls this when the DAG is parsed
    (a wrong value fails the DAG's import, not a run hours later), and each run's StepConfig again.

    ``items_per_call`` may still be a template at parse time; it is checked once rendered.
    """
    if not 0 <= min_confidence <= 1:
        raise ValueError(f"min_confidence must be between 0 and 1, got {min_confidence!r}")
    if not 0 <= max_failure_rate <= 1:
        raise ValueError(f"max_failure_rate must be between 0 and 1, got {max_failure_rate!r}")
    for name, value in (("batch_size", batch_size), ("max_concurrency", max_concurrency)):
        if value < 1:
            raise ValueError(f"{name} must be at least 1, got {value!r}")
    if not isinstance(items_per_call, str) and items_per_call < 1:
        raise ValueError(f"items_per_call must be at least 1, got {items_per_call!r}")
    if lease_seconds <= 0:
        raise ValueError(f"lease_seconds must be positive, got {lease_seconds!r}")
    check_settings(spot_check, max_error_rate)


def defaults_of(cls: type) -> dict[str, Any]:
    """A dataclass's field defaults by name: the operator's parameters default to these, so a default
    is written once, where the engine reads it."""
    return {f.name: f.default for f in dataclasses.fields(cls) if f.default is not dataclasses.MISSING}
