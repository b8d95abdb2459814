"""Which items of a run a person decided, and what they changed: for reports and their templates.

An item's ``ai_result`` is the model's answer, or the answer a person corrected (merged with the
model's); the audit rows say which. :func:`read_review_decisions` reads each item's last decision
by a person from the run's review moves (index ``transitions_review_decisions``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from conveyor.ledger.statuses import REVIEW_VALUES

if TYPE_CHECKING:
    import psycopg

_REVIEWER = "reviewer:"


@dataclass(frozen=True)
class ReviewDecision:
    """A person's last decision on an item.

    :param reviewer: who decided (the name, without the ``reviewer:`` prefix of the audit row).
    :param from_status: where the item waited (``quarantined``: its input; ``pending_review``: the
        model's answer; ``pending_approval``: a business rule).
    :param to_status: where the decision sent it (``rejected``, ``corrected``, the next status...).
    :param changes: the fields the person changed (``{"field", "before", "after"}``); empty when
        they approved the item as it was.
    :param model_answer: the model's own answer, when the person corrected it.
    """

    item_id: str
    reviewer: str
    from_status: str
    to_status: str
    at: datetime
    comment: str | None
    changes: list[dict[str, Any]] = field(default_factory=list)
    model_answer: Any = None


def read_review_decisions(conn: psycopg.Connection, workflow: str, run_id: str) -> dict[str, ReviewDecision]:
    """item id -> the last decision a person made on it, for the items of one run."""
    rows = conn.execute(
        "SELECT DISTINCT ON (item_id) item_id, actor, from_status, to_status, at, reason, detail"
        " FROM conveyor.transitions WHERE workflow = %s AND run_id = %s AND from_status = ANY(%s)"
        " AND actor LIKE %s ORDER BY item_id, id DESC",
        (workflow, run_id, REVIEW_VALUES, _REVIEWER + "%"),
    ).fetchall()
    out = {}
    for item_id, actor, from_status, to_status, at, reason, detail in rows:
        detail = detail if isinstance(detail, dict) else {}
        out[item_id] = ReviewDecision(
            item_id=item_id, reviewer=actor[len(_REVIEWER) :], from_status=from_status, to_status=to_status, at=at,
            comment=reason, changes=list(detail.get("changes") or []), model_answer=detail.get("model_answer"),
        )  # fmt: skip
    return out
