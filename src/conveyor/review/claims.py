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
from dataclasses import dataclass
from datetime import datetime

from conveyor.errors import ReviewError
from conveyor.ledger.store import Ledger


@dataclass(frozen=True)
class Claim:
    """Who has an item open, until when.

    :param item_id: the item.
    :param reviewer: the reviewer's name (the authenticated user).
    :param claimed_at: when the claim was taken (or last renewed).
    :param expires_at: when it ends by itself.
    """

    item_id: str
    reviewer: str
    claimed_at: datetime
    expires_at: datetime

    def as_json(self) -> dict[str, str]:
        return {
            "item_id": self.item_id,
            "reviewer": self.reviewer,
            "claimed_at": self.claimed_at.isoformat(),
            "expires_at": self.expires_at.isoformat(),
        }


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
            # One guarded upsert: the row is taken only when free, expired, or already ours.
            row = conn.execute(
                "INSERT INTO conveyor.review_claims AS c (item_id, reviewer, claimed_at, expires_at)"
                " VALUES (%(item)s, %(who)s, now(), now() + make_interval(mins => %(minutes)s))"
                " ON CONFLICT (item_id) DO UPDATE SET reviewer = EXCLUDED.reviewer,"
                " claimed_at = EXCLUDED.claimed_at, expires_at = EXCLUDED.expires_at"
                " WHERE c.reviewer = EXCLUDED.reviewer OR c.expires_at <= now()"
                " RETURNING item_id, reviewer, claimed_at, expires_at",
                {"item": item_id, "who": reviewer, "minutes": self.minutes},
            ).fetchone()
            if row is None:
                held = conn.execute(
                    "SELECT item_id, reviewer, claimed_at, expires_at FROM conveyor.review_claims WHERE item_id = %s",
                    (item_id,),
                ).fetchone()
                if held is not None:
                    raise ClaimHeld(Claim(*held))
                return self.claim(item_id, reviewer)  # released in between: take it
        return Claim(*row)

    def release(self, item_ids: Sequence[str], reviewer: str | None = None) -> int:
        """End the claims on ``item_ids`` (only ``reviewer``'s when given); returns how many ended."""
        if not item_ids:
            return 0
        query = "DELETE FROM conveyor.review_claims WHERE item_id = ANY(%s)"
        params: list[object] = [list(item_ids)]
        if reviewer is not None:
            query += " AND reviewer = %s"
            params.append(reviewer)
        with self.ledger.connect() as conn:
            return conn.execute(query, params).rowcount

    def live(self, item_ids: Sequence[str]) -> dict[str, Claim]:
        """The live (unexpired) claims among ``item_ids``, each looked up by key."""
        if not item_ids:
            return {}
        with self.ledger.connect() as conn:
            rows = conn.execute(
                "SELECT item_id, reviewer, claimed_at, expires_at FROM conveyor.review_claims"
                " WHERE item_id = ANY(%s) AND expires_at > now()",
                (list(item_ids),),
            ).fetchall()
        return {row[0]: Claim(*row) for row in rows}
