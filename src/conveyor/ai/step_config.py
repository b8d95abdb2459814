"""The AI step's settings: its tunables (:class:`StepSettings`) and one run's resolved config.

:class:`StepSettings` is the one place each tunable's default is written and each is checked: the
operator's keyword arguments default to its fields and build one when the DAG is parsed (a wrong
value fails the DAG's import, naming the setting, not a run hours later). :class:`StepConfig` is
what :class:`~conveyor.ai.operators.AIStepOperator` hands the engine (:mod:`conveyor.ai.runner`) for
one run: the settings plus what only the run knows (its id, the actor, the shard's lease holder,
the rendered ``items_per_call``); the spot checks' seed is derived here, from the workflow, the run
and the step, so every retry of a run draws the same items.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from conveyor.ai.definitions import AITask
from conveyor.ai.models.resolve import LOCAL
from conveyor.ai.retries import RetryPolicy
from conveyor.ai.spot_checks import DEFAULT_MAX_ERROR_RATE, DEFAULT_SPOT_CHECK, check_settings, spot_seed
from conveyor.ledger.leases import Holder


@dataclass(frozen=True)
class StepSettings:
    """The AI step's tunables, checked when built.

    See :class:`~conveyor.ai.operators.AIStepOperator` for the meaning of each; ``retry`` holds the
    operator's ``max_attempts``, ``backoff_base``, ``backoff_max`` and ``max_retry_after``.
    """

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
    call_timeout: float = 30.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    confidence_method: str = "logprobs"
    samples: int = 3
    repair_attempts: int = 1
    #: sharded: seconds a claimed chunk stays this holder's without renewal
    lease_seconds: float = 300.0

    def __post_init__(self) -> None:
        if not 0 <= self.min_confidence <= 1:
            raise ValueError(f"min_confidence must be between 0 and 1, got {self.min_confidence!r}")
        if not 0 <= self.max_failure_rate <= 1:
            raise ValueError(f"max_failure_rate must be between 0 and 1, got {self.max_failure_rate!r}")
        for name in ("batch_size", "max_concurrency"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)!r}")
        if self.lease_seconds <= 0:
            raise ValueError(f"lease_seconds must be positive, got {self.lease_seconds!r}")
        check_settings(self.spot_check, self.max_error_rate)

    def replace(self, **changes: Any) -> StepSettings:
        """These settings with ``changes`` (RetryPolicy's fields among them by name), checked again."""
        retry = {name: changes.pop(name) for name in list(changes) if name in RETRY_FIELDS}
        if retry:
            changes["retry"] = dataclasses.replace(changes.get("retry", self.retry), **retry)
        return dataclasses.replace(self, **changes)

    @classmethod
    def of(cls, values: Mapping[str, Any]) -> StepSettings:
        """The settings among ``values`` (the operator's parameters by name, RetryPolicy's among them);
        names of neither are ignored, so an operator passes its ``locals()``."""
        retry = values.get("retry") or RetryPolicy(**_picked(RetryPolicy, values))
        return cls(**{name: value for name, value in _picked(cls, values).items() if name != "retry"}, retry=retry)


def _picked(cls: type, values: Mapping[str, Any]) -> dict[str, Any]:
    return {f.name: values[f.name] for f in dataclasses.fields(cls) if f.init and f.name in values}


#: Every tunable's default, for the operator's signature.
DEFAULTS = StepSettings()
#: The tunables by the operator's names: StepSettings' own and its RetryPolicy's.
RETRY_FIELDS = frozenset(f.name for f in dataclasses.fields(RetryPolicy))
TUNABLES = frozenset(f.name for f in dataclasses.fields(StepSettings) if f.name != "retry") | RETRY_FIELDS


def check_items_per_call(value: int | str) -> None:
    """``items_per_call`` may be a template when the DAG is parsed; it is checked once rendered."""
    if not isinstance(value, str) and value < 1:
        raise ValueError(f"items_per_call must be at least 1, got {value!r}")


@dataclass
class StepConfig:
    """Everything one run of the step needs: the settings and what only the run knows."""

    workflow: str
    run_id: str
    task: AITask
    actor: str
    settings: StepSettings = DEFAULTS
    from_status: str | None = None
    to_status: str | None = None
    model: Any = LOCAL
    fallback_model: Any = None
    items_per_call: int = 1
    step: str | None = None
    #: sharded: the task instance whose leases these are (None: the whole run in this process)
    holder: Holder | None = None
    #: sharded: the shard's own label, shown in the summary (e.g. its ``shard`` expand value)
    shard: Any = None
    #: seconds between looks at an open breaker's state (an engine detail; tests shorten it)
    breaker_poll_interval: float = 1.0
    #: sharded: seconds between looks at the siblings' live leases once nothing is left to claim
    sibling_poll_interval: float = 1.0
    #: the spot checks' draw in this run (derived from the workflow, the run and the step)
    seed: str = field(init=False, default="")

    def __post_init__(self) -> None:
        self.from_status = self.from_status or self.task.from_status
        self.to_status = self.to_status or self.task.to_status
        self.step = self.step or self.task.name
        check_items_per_call(self.items_per_call)
        self.seed = spot_seed(self.workflow, self.run_id, self.step)

    @classmethod
    def of(cls, **values: Any) -> StepConfig:
        """A config from flat keyword arguments, the tunables among them under the operator's names
        (``min_confidence=0.9``, ``max_attempts=2`` or a whole ``retry=RetryPolicy(...)``)."""
        known = {f.name for f in dataclasses.fields(cls) if f.init}
        known |= {f.name for f in dataclasses.fields(StepSettings)} | {f.name for f in dataclasses.fields(RetryPolicy)}
        unknown = sorted(values.keys() - known)
        if unknown:
            raise TypeError(f"StepConfig.of() got unexpected keyword arguments: {', '.join(unknown)}")
        return cls(**_picked(cls, values), settings=StepSettings.of(values))
