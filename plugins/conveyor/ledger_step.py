"""The base of Conveyor's operators that work on one workflow's items of their run."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from conveyor.ledger.connection import CONN_ID

if TYPE_CHECKING:
    from conveyor.ledger import Ledger


class LedgerStepOperator(BaseOperator):
    """A step of a workflow that reads and moves its run's items in the ledger.

    :param workflow: the workflow whose items the step works on.
    :param ledger_conn_id: the Airflow connection of the ledger.
    """

    def __init__(self, *, workflow: str, ledger_conn_id: str = CONN_ID, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.workflow = workflow
        self.ledger_conn_id = ledger_conn_id

    def ledger(self) -> Ledger:
        """The ledger (resolved when the task runs, never at DAG parse time)."""
        from conveyor.ledger import Ledger

        return Ledger(conn_id=self.ledger_conn_id)
