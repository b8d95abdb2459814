"""Move the run's items from one status to the next once a step (e.g. a sign-off) allows it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from conveyor.ledger.actors import task_actor
from conveyor.ledger_step import LedgerStepOperator

if TYPE_CHECKING:
    from airflow.sdk import Context


class PromoteItemsOperator(LedgerStepOperator):
    """Move every item of the run in ``from_status`` to ``to_status`` (one guarded, audited write).

    :param workflow: the workflow.
    :param from_status: the status items hold now.
    :param to_status: the status they move to.
    :param reason: the audit reason (templated).
    """

    resumable = True  # only the run's items still waiting in its input status are worked on

    template_fields: Sequence[str] = ("reason",)

    def __init__(self, *, from_status: str, to_status: str, reason: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.from_status = from_status
        self.to_status = to_status
        self.reason = reason

    def execute(self, context: Context) -> dict[str, int]:

        ledger = self.ledger(context)
        ids = ledger.item_ids(workflow=self.workflow, run_id=context["run_id"], status=self.from_status)
        result = ledger.transition(self.workflow, ids, to_status=self.to_status, from_status=self.from_status,
                                   actor=task_actor(context), reason=self.reason, atomic=False)
        self.log.info("%d item(s) moved %s -> %s", len(result.moved), self.from_status, self.to_status)
        return {"moved": len(result.moved)}
