"""``ItemEffectOperator``: one side effect per item (a payment, an API call, a message), done once.

Subclass it and write :meth:`ItemEffectOperator.apply`; Conveyor does the rest:

    class PayInvoices(ItemEffectOperator):
        effect = "pay"

        def apply(self, items, context):
            outcome = EffectOutcome()
            for item in items:
                if erp.pay(item.ai_result, idempotency_key=item.idempotency_key):
                    outcome.done[item.item_id] = {"paid": True}
                else:
                    outcome.refused[item.item_id] = "the ERP refused the payment"
            return outcome

For the run's items in ``from_status``:

1. each (item, effect) is claimed in the ledger; items whose effect an earlier attempt completed
   are not handed to ``apply`` again (a retry or a clear never pays twice);
2. ``apply`` gets the others, each with a stable ``idempotency_key`` to pass to the external
   system (so even a crash between the effect and its record is safe on a system that honours it);
3. done items are recorded and move to ``to_status``; refused ones go to a person
   (``pending_review``, with the reason); a person retries the effect, records it as done
   elsewhere with a reference, or rejects the item (an approval as it is is refused: it would
   record ``to_status`` without the effect); an item ``apply``
   neither did nor refused fails the task, so a retry tries it again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow.sdk.exceptions import AirflowException

from conveyor.ledger_step import LedgerStepOperator

if TYPE_CHECKING:
    from airflow.sdk import Context

    from conveyor.ledger.records import Item


@dataclass(frozen=True)
class EffectItem:
    """An item handed to :meth:`ItemEffectOperator.apply`.

    :param item: the item as the ledger holds it.
    :param idempotency_key: stable for (item, effect): what the external system should receive.
    """

    item: Item
    idempotency_key: str

    @property
    def item_id(self) -> str:
        return self.item.item_id

    @property
    def payload(self) -> dict[str, Any]:
        return self.item.payload

    @property
    def ai_result(self) -> Any:
        return self.item.ai_result


@dataclass
class EffectOutcome:
    """What :meth:`ItemEffectOperator.apply` did.

    :param done: item id -> a JSON-ready record of the effect (kept in the ledger).
    :param refused: item id -> why it cannot be done (a person decides).
    """

    done: dict[str, Any] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)


class ItemEffectOperator(LedgerStepOperator):
    """Do :attr:`effect` once per item of the run in ``from_status``, then move it to ``to_status``.

    :param workflow: the workflow's :class:`~conveyor.workflow.Workflow` (or its stored name).
    :param from_status: where the items wait (e.g. ``approved``).
    :param to_status: where done items go (e.g. ``paid``).
    :param effect: the effect's name (the ledger key's step part); default the class's ``effect``.
    :param reason: the audit reason of the move.
    """

    effect: str = ""
    ui_color = "#fdebd0"

    def __init__(
        self, *, from_status: str, to_status: str, effect: str | None = None, reason: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.effect = effect or self.effect or self.task_id
        self.from_status = from_status
        self.to_status = to_status
        self.reason = reason

    def apply(self, items: Sequence[EffectItem], context: Context) -> EffectOutcome:
        """Do the effect for ``items``; say which were done and which were refused."""
        raise NotImplementedError(f"{type(self).__name__} must implement apply()")

    def execute(self, context: Context) -> dict[str, int]:
        from conveyor.ledger.actors import task_actor
        from conveyor.ledger.statuses import Status
        from conveyor.ledger.store import ItemUpdate

        ledger = self.ledger(context)
        actor = task_actor(context)
        items = ledger.items(workflow=self.workflow, run_id=context["run_id"], status=self.from_status, limit=None)
        if not items:
            self.log.info("No items of run %s in %r.", context["run_id"], self.from_status)
            return {"done": 0, "done_before": 0, "refused": 0}
        open_ = set(ledger.claim_effects(self.effect, [i.item_id for i in items], actor=actor))
        before = [i.item_id for i in items if i.item_id not in open_]
        todo = [EffectItem(i, ledger.effect_key(i.item_id, self.effect)) for i in items if i.item_id in open_]
        outcome = self.apply(todo, context) if todo else EffectOutcome()
        unknown = (set(outcome.done) | set(outcome.refused)) - open_
        if unknown:
            raise AirflowException(f"apply() answered for items it was not given: {sorted(unknown)[:5]}")
        if outcome.done:
            ledger.complete_effects(self.effect, outcome.done)
        ledger.transition(self.workflow, [*before, *outcome.done], to_status=self.to_status,
                          from_status=self.from_status, actor=actor, reason=self.reason or self.effect)
        if outcome.refused:
            ledger.transition(
                self.workflow,
                # The audit row names the effect: an approval cannot move the item to to_status
                # without it (conveyor.review.blockers); a person retries it, records it as done
                # elsewhere, or rejects it.
                {i: ItemUpdate(reason=why, review_target=self.to_status,
                               detail={"effect": self.effect, "from_status": self.from_status})
                 for i, why in outcome.refused.items()},
                to_status=Status.PENDING_REVIEW, from_status=self.from_status, actor=actor,
            )
        summary = {"done": len(outcome.done), "done_before": len(before), "refused": len(outcome.refused)}
        self.log.info("%s of run %s: %s", self.effect, context["run_id"], summary)
        missing = open_ - set(outcome.done) - set(outcome.refused)
        if missing:
            raise AirflowException(
                f"{len(missing)} item(s) were neither done nor refused by {self.effect}; a retry tries them "
                f"again: {sorted(missing)[:5]}"
            )
        return summary
