"""The AI step's settings for one run: the operator's parameters, resolved and checked once.

:class:`StepConfig` is what :class:`~conveyor.ai.operators.AIStepOperator` hands the engine
(:mod:`conveyor.ai.runner`); the spot checks' seed is derived here, from the workflow, the run and
the step, so every retry of a run draws the same items.
"""

from __future__ import annotations

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
        if not 0 <= self.min_confidence <= 1:
            raise ValueError("min_confidence must be between 0 and 1")
        if not 0 <= self.max_failure_rate <= 1:
            raise ValueError("max_failure_rate must be between 0 and 1")
        if self.batch_size < 1 or self.max_concurrency < 1 or self.items_per_call < 1:
            raise ValueError("batch_size, max_concurrency and items_per_call must be at least 1")
        if self.lease_seconds <= 0:
            raise ValueError("lease_seconds must be positive")
        check_settings(self.spot_check, self.max_error_rate)
        self.seed = spot_seed(self.workflow, self.run_id, self.step)
