"""Errors of review decisions. Each message says what a reviewer needs to know to act."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

# Review's base (under LedgerError) is declared with the others in conveyor.errors; importable from here too.
from conveyor.errors import ReviewError as ReviewError

if TYPE_CHECKING:  # blockers imports this module (through coercion): for annotations only
    from conveyor.review.blockers import Blocker


class InvalidDecision(ReviewError, ValueError):
    """A decision that cannot apply to this item (e.g. a correction of an item that is not quarantined)."""


class NotAwaitingReview(ReviewError):
    """The item is not on the review queue and no person ever decided it.

    :param item_id: the item.
    :param status: its current status.
    """

    def __init__(self, item_id: str, status: str) -> None:
        super().__init__(
            f"item {item_id!r} is not awaiting review: it is {status!r}; only quarantined or "
            f"pending_review items can be decided. Nothing was changed."
        )
        self.item_id = item_id
        self.status = status


class DecisionConflict(NotAwaitingReview):
    """Someone else decided the item first (a race lost, or a decision made earlier).

    :param item_id: the item.
    :param status: its current status (what the winning decision made of it).
    :param decided_by: the actor of the winning decision (``reviewer:<name>`` or a task).
    :param decided_at: when it was decided.
    """

    def __init__(self, item_id: str, status: str, decided_by: str, decided_at: datetime) -> None:
        ReviewError.__init__(
            self,
            f"item {item_id!r} was already decided by {decided_by} at "
            f"{decided_at:%Y-%m-%d %H:%M:%S %Z}".rstrip()
            + f" (it is now {status!r}). Your decision was not applied.",
        )
        self.item_id = item_id
        self.status = status
        self.decided_by = decided_by
        self.decided_at = decided_at


class ApprovalBlocked(InvalidDecision):
    """An approval that would let an item past its step's contract (see :mod:`conveyor.review.blockers`).

    :param item_id: the item.
    :param blockers: each field and what it needs, with the decisions that apply instead.
    """

    def __init__(self, item_id: str, blockers: list[Blocker]) -> None:
        from conveyor.review.blockers import describe

        super().__init__(f"item {item_id!r} cannot be approved as it is: {describe(blockers)}. Nothing was changed.")
        self.item_id = item_id
        self.blockers = blockers
