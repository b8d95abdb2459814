"""Decisions become labels: every decided AI answer records whether the model's answer stood.

Called by the one decision path (:mod:`conveyor.review.bulk` for approvals and rejections, the
correction in :mod:`conveyor.review.review_queue`, the undo), right after the decision's move:
approve = the answer was right, correct = it was wrong (and which fields), reject = the input was
bad. The ledger builds each label set-based from the move that routed the item to review (the
step, the answer's confidence, the checks it failed, whether it was a spot check and its sampling
share); items no AI step routed get none. The estimate built on them is
:mod:`conveyor.monitoring.accuracy`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from conveyor.ledger.ai_labels import Decision
from conveyor.ledger.errors import LedgerUnavailable
from conveyor.ledger.store import Ledger

log = logging.getLogger(__name__)

__all__ = ["Decision", "forget_labels", "record_labels"]


def record_labels(ledger: Ledger, decisions: Sequence[Decision], actor: str) -> int:
    """Label decided answers; returns how many labels were written.

    The decision is committed before: a ledger lost now costs the labels (logged), never the
    decision, which a person would otherwise be told failed although it stands.
    """
    if not decisions:
        return 0
    try:
        return ledger.record_ai_labels(decisions, actor=actor)
    except LedgerUnavailable:
        log.warning("decided, but the labels of %d answer(s) were not recorded", len(decisions), exc_info=True)
        return 0


def forget_labels(ledger: Ledger, item_ids: Sequence[str]) -> int:
    """A decision taken back: its answer is undecided again, its label goes."""
    try:
        return ledger.forget_ai_labels(item_ids)
    except LedgerUnavailable:
        log.warning("undone, but the labels of %s were not removed", list(item_ids)[:5], exc_info=True)
        return 0
