"""Where a blocked item goes instead of an approval (see :mod:`conveyor.review.blockers`).

* ``retry_ai``: an item its AI step gave no usable answer goes back through ``corrected``: the
  run's review step validates it again and runs the steps between its gate and itself, the AI step
  among them (:mod:`conveyor.review.catch_up`), so the same run processes it;
* ``retry_effect``: an item whose effect was refused goes back to the effect step's input status,
  to be tried again when that step runs (clear it for the run);
* ``done_elsewhere``: the refused effect was done by other means; the item moves on to the
  effect's status and the effect is recorded done with the reviewer's ``reference``.
"""

from __future__ import annotations

from collections.abc import Mapping

from conveyor.ledger.statuses import Status
from conveyor.ledger.store import Item, ItemUpdate, Ledger
from conveyor.review.blockers import blockers_of
from conveyor.review.errors import InvalidDecision


def way_on(
    ledger: Ledger, item: Item, action: str, *, comment: str | None, actor: str, reference: str | None
) -> tuple[str, ItemUpdate]:
    """The target status and the write of ``action`` on ``item``.

    :param ledger: the ledger.
    :param item: the item (on the queue).
    :param action: ``retry_ai``, ``retry_effect`` or ``done_elsewhere``.
    :param comment: the reviewer's reason.
    :param actor: who decides.
    :param reference: ``done_elsewhere``: where the effect was done.
    :raises InvalidDecision: the action does not apply to this item.
    """
    from conveyor.review.decisions import approval_target

    if action == "retry_ai":
        if item.status != Status.PENDING_REVIEW or not item.review_target:
            raise InvalidDecision(f"item {item.item_id!r} is {item.status!r}: only an item an AI step sent to "
                                  "review can be sent back to it")  # fmt: skip
        detail = {"action": action, "ai_step_status": item.review_target}
        return Status.CORRECTED, ItemUpdate(reason=comment or "sent back to the AI step",
                                            review_target=item.review_target, detail=detail)  # fmt: skip
    found = blockers_of(ledger, [item]).get(item.item_id, [])
    if not any(action in b.actions for b in found):
        raise InvalidDecision(f"{action} applies to an item whose effect was refused; item {item.item_id!r} is not one")
    entry = ledger.latest_moves([item.item_id], to_status=item.status).get(item.item_id)
    effect_detail = dict(entry.detail) if entry is not None and isinstance(entry.detail, Mapping) else {}
    effect = str(effect_detail.get("effect"))
    if action == "retry_effect":
        back = str(effect_detail.get("from_status") or "")
        detail = {"action": action, "effect": effect}
        return back, ItemUpdate(reason=comment or f"retry {effect}: clear the effect step of run {item.run_id!r} "
                                "to try it again", review_target=item.review_target, detail=detail)  # fmt: skip
    detail = {"action": action, "effect": effect, "reference": (reference or "").strip()}
    target = item.review_target or approval_target(item, ledger.history(item.item_id), ledger)
    return target, ItemUpdate(reason=comment or f"{effect} done elsewhere: {detail['reference']}", detail=detail)
