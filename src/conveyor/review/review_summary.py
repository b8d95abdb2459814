"""What a review step came to: the :class:`~conveyor.review.sensors.HumanReviewSensor`'s XCom, typed.

Its keys are a contract (a later step, an operator's alert and ``workflow_health`` read them;
``tests/test_xcom_shapes.py`` pins them)::

    {"workflow", "run_id", "needed_review", "decided", "pending", "decided_by": {actor: n},
     "outcomes": {status: n}, "outcome": "all_decided" | "timed_out", "escalation": declared,
     "escalation_applied": None | "fail" | "proceed" | "reject", "auto_rejected",
     "item_escalations": {action: n}, "caught_up": [steps run again for corrected items],
     "waited_seconds", "deadline"}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from conveyor.review.run_state import RunReviewState


@dataclass(frozen=True)
class ReviewSummary:
    """The review of one run at the step's end.

    :param needed_review: items that needed a person in this run (decided and still waiting).
    :param decided_by: decisions per actor (``reviewer:<name>``, or the step for an escalation).
    :param outcomes: decisions per resulting status.
    :param escalation: the step's declared escalation; ``escalation_applied`` the one the deadline
        applied (None: every item had a decision in time).
    :param auto_rejected: items the ``reject`` escalation moved to rejected.
    :param item_escalations: items escalated one by one (``item_timeout``), per action.
    :param caught_up: steps run again for corrected items (see :mod:`conveyor.review.catch_up`).
    """

    workflow: str
    run_id: str
    needed_review: int
    decided: int
    pending: int
    decided_by: Mapping[str, int]
    outcomes: Mapping[str, int]
    escalation: str
    escalation_applied: str | None = None
    auto_rejected: int = 0
    item_escalations: Mapping[str, int] = field(default_factory=dict)
    caught_up: Sequence[str] = ()
    waited_seconds: float = 0.0
    deadline: str = ""

    @classmethod
    def of(cls, state: RunReviewState, **rest: Any) -> ReviewSummary:
        """The summary of ``state`` (the run's review as the ledger has it) and the step's own facts."""
        return cls(
            workflow=state.workflow,
            run_id=state.run_id,
            needed_review=len(state.decided_items) + len(state.pending),
            decided=len(state.decided_items),
            pending=len(state.pending),
            decided_by=state.by_actor,
            outcomes=state.by_outcome,
            **rest,
        )

    @property
    def outcome(self) -> str:
        return "timed_out" if self.escalation_applied else "all_decided"

    def as_xcom(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(
            decided_by=dict(self.decided_by),
            outcomes=dict(self.outcomes),
            item_escalations=dict(self.item_escalations),
            caught_up=list(self.caught_up),
            outcome=self.outcome,
        )
        return data

    def describe(self) -> str:
        """One line a person can act on: what was decided, by whom, and what the escalation did."""
        who = ", ".join(f"{actor} {n}" for actor, n in self.decided_by.items()) or "nobody"
        head = (
            f"review of {self.workflow}/{self.run_id}: {self.needed_review} item(s) needed a "
            f"person, {self.decided} decided (by {who}; outcomes {dict(self.outcomes) or {}})"
        )
        applied = self.escalation_applied
        if applied is None:
            return f"{head}; {self.pending} left waiting"
        if applied == "fail":
            return (
                f"{head}; {self.pending} item(s) still waiting at the deadline: "
                "escalation 'fail' fails the task so its failure callback alerts a person; "
                "the items stay on the review queue"
            )
        if applied == "proceed":
            return (
                f"{head}; {self.pending} item(s) still waiting at the deadline: "
                "escalation 'proceed' lets the run go on with the approved items only; "
                "the others stay on the review queue"
            )
        return (
            f"{head}; escalation 'reject' moved {self.auto_rejected} item(s) still waiting at the deadline "
            f"to rejected ({self.pending} left waiting)"
        )


def human_duration(seconds: float) -> str:
    """``5400`` as ``1h30m``: how long the step waited, in a reason a person reads."""
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"
