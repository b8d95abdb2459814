"""Review claims: the ``conveyor.review_claims`` rows (migration 0010), one per item someone has open.

What a claim means, how long it lasts and what a held claim refuses is
:mod:`conveyor.review.claims`'s; this module owns the statements. Taking a claim is one guarded
upsert, so two reviewers can never both hold a live claim on one item. The functions take an open
connection of the store.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import psycopg  # the ledger's modules load with the DAGs: the driver only when a statement runs


_COLUMNS = "item_id, reviewer, claimed_at, expires_at"


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


def take(conn: psycopg.Connection, item_id: str, reviewer: str, *, minutes: int) -> Claim | None:
    """Claim ``item_id`` for ``reviewer`` for ``minutes``: the row is taken only when it is free,
    expired, or already the reviewer's (then renewed). None when another reviewer holds it.

    :param minutes: how long the claim lasts from now.
    """
    row = conn.execute(
        "INSERT INTO conveyor.review_claims AS c (item_id, reviewer, claimed_at, expires_at)"
        " VALUES (%(item)s, %(who)s, now(), now() + make_interval(mins => %(minutes)s))"
        " ON CONFLICT (item_id) DO UPDATE SET reviewer = EXCLUDED.reviewer,"
        " claimed_at = EXCLUDED.claimed_at, expires_at = EXCLUDED.expires_at"
        " WHERE c.reviewer = EXCLUDED.reviewer OR c.expires_at <= now()"
        f" RETURNING {_COLUMNS}",
        {"item": item_id, "who": reviewer, "minutes": minutes},
    ).fetchone()
    return Claim(*row) if row is not None else None


def holder(conn: psycopg.Connection, item_id: str) -> Claim | None:
    """The claim on ``item_id`` (live or expired), or None when there is none."""
    row = conn.execute(f"SELECT {_COLUMNS} FROM conveyor.review_claims WHERE item_id = %s", (item_id,)).fetchone()
    return Claim(*row) if row is not None else None


def release(conn: psycopg.Connection, item_ids: Sequence[str], reviewer: str | None = None) -> int:
    """End the claims on ``item_ids`` (only ``reviewer``'s when given); returns how many ended."""
    query = "DELETE FROM conveyor.review_claims WHERE item_id = ANY(%s)"
    params: list[object] = [list(item_ids)]
    if reviewer is not None:
        query += " AND reviewer = %s"
        params.append(reviewer)
    return conn.execute(query, params).rowcount


def live(conn: psycopg.Connection, item_ids: Sequence[str]) -> dict[str, Claim]:
    """item id -> its live (unexpired) claim, among ``item_ids``, each looked up by key."""
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM conveyor.review_claims WHERE item_id = ANY(%s) AND expires_at > now()",
        (list(item_ids),),
    ).fetchall()
    return {row[0]: Claim(*row) for row in rows}


__all__ = ["Claim", "holder", "live", "release", "take"]
