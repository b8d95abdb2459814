"""Review claims: "being reviewed by X", so two people working the queue do not read the same item.

Opening an item on the review page claims it for ``[conveyor] review_claim_minutes`` minutes
(renewed while the reviewer keeps it open). Others see the holder in the list and on the item. A
claim is advice, not a lock: a second reviewer may still decide (decisions stay guarded by the
item's from-status, so each item is decided once), but a second *claim* of a held item is refused
with :class:`ClaimHeld`, naming the holder and when the claim ends. A claim ends by itself when it
expires, when its reviewer releases it, or when the item is decided through the bulk route.

Claims live in ``conveyor.review_claims`` (migration 0010), beside the items: they are not item
data and have no audit row (the decision that follows has one).
"""

from __future__ import annotations

from collections.abc import Sequence

from conveyor.errors import ReviewError
from conveyor.ledger import review_claims
from conveyor.ledger.review_claims import Claim
from conveyor.ledger.store import Ledger

__all__ = ["Claim", "ClaimHeld", "ReviewClaims", "claim_minutes"]


class ClaimHeld(ReviewError):
    """Another reviewer holds a live claim on the item.

    :param claim: the holder's claim.
    """

    def __init__(self, claim: Claim) -> None:
        super().__init__(
            f"item {claim.item_id!r} is being reviewed by {claim.reviewer} until "
            f"{claim.expires_at:%H:%M:%S %Z}".rstrip()
            + "; you may still decide it (the first decision wins), or pick another item"
        )
        self.claim = claim


def claim_minutes() -> int:
    """``[conveyor] review_claim_minutes`` (at least 1)."""
    from conveyor import config

    return max(1, config.get_int("review_claim_minutes"))


class ReviewClaims:
    """Claims of review items, over one ledger.

    :param ledger: the item ledger.
    :param minutes: how long a claim lasts (default ``[conveyor] review_claim_minutes``).
    """

    def __init__(self, ledger: Ledger, *, minutes: int | None = None) -> None:
        self.ledger = ledger
        self.minutes = minutes if minutes is not None else claim_minutes()

    def claim(self, item_id: str, reviewer: str) -> Claim:
        """Claim ``item_id`` for ``reviewer`` (renewing their own claim, taking over an expired one).

        :raises ClaimHeld: another reviewer holds a live claim.
        """
        with self.ledger.connect() as conn:
            claim = review_claims.take(conn, item_id, reviewer, minutes=self.minutes)
            if claim is None:
                held = review_claims.holder(conn, item_id)
                if held is not None:
                    raise ClaimHeld(held)
                return self.claim(item_id, reviewer)  # released in between: take it
        return claim

    def release(self, item_ids: Sequence[str], reviewer: str | None = None) -> int:
        """End the claims on ``item_ids`` (only ``reviewer``'s when given); returns how many ended."""
        if not item_ids:
            return 0
        with self.ledger.connect() as conn:
            return review_claims.release(conn, item_ids, reviewer)

    def live(self, item_ids: Sequence[str]) -> dict[str, Claim]:
        """The live (unexpired) claims among ``item_ids``, each looked up by key."""
        if not item_ids:
            return {}
        with self.ledger.connect() as conn:
            return review_claims.live(conn, item_ids)
