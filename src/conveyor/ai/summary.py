"""What one AI step (or one shard of it) did: the task's XCom, typed.

:class:`AIStepSummary` is built once, at the end of a run of the step (or when it fails, carried
by :class:`~conveyor.ai.errors.AIStepFailed`), and :meth:`AIStepSummary.as_xcom` is the task's
return value. Its keys are a contract: DAG authors read them downstream (``items``, ``review``,
``failed``), and ``tests/test_xcom_shapes.py`` pins them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class AIStepSummary:
    """Counts of one run of the step.

    :param items: the items handled (passed, to review, deferred).
    :param passed: moved on to ``to_status``.
    :param review: sent to a person (doubtful answers and failures; spot checks apart).
    :param spot_checked: answers that passed every check, sent to a person by the spot-check draw.
    :param failed: items that failed (bad input, model errors, invalid output), by reason in
        ``failure_reasons``; ``review_reasons`` counts the checks that sent answers to review.
    :param calls: model requests made; ``cache_hits`` answers taken from the result cache.
    :param fallback_used: items the fallback model answered.
    :param raced: items someone else (a sibling shard, a lost acknowledgement's first try) moved first.
    :param shard: sharded: the shard's label, and ``claimed`` the items it claimed.
    :param breaker: the open breaker that stopped the step, when one did.
    """

    workflow: str
    run_id: str
    step: str | None
    model: str
    fallback_model: str | None
    from_status: str | None
    to_status: str | None
    items: int = 0
    passed: int = 0
    review: int = 0
    spot_checked: int = 0
    spot_check: float = 0.0
    spot_seed: str = ""
    failed: int = 0
    review_reasons: Mapping[str, int] = field(default_factory=dict)
    failure_reasons: Mapping[str, int] = field(default_factory=dict)
    calls: int = 0
    cache_hits: int = 0
    fallback_used: int = 0
    raced: int = 0
    seconds: float = 0.0
    sharded: bool = False
    shard: Any = None
    claimed: int = 0
    breaker: str | None = None

    def as_xcom(self) -> dict[str, Any]:
        """The task's return value; ``shard`` and ``claimed`` only when sharded, ``breaker`` only when open."""
        data = asdict(self)
        data["review_reasons"] = dict(self.review_reasons)
        data["failure_reasons"] = dict(self.failure_reasons)
        del data["sharded"]
        if not self.sharded:
            del data["shard"], data["claimed"]
        if self.breaker is None:
            del data["breaker"]
        return data
