"""The base of Conveyor's operators that work on one workflow's items of their run."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from airflow.sdk import BaseOperator

from conveyor.workflow import Workflow

if TYPE_CHECKING:
    from airflow.sdk import Context

    from conveyor.ledger import Ledger


def workflow_parts(workflow: str | Workflow) -> tuple[str, Workflow | None]:
    """(name, declaration or None) of an operator's ``workflow`` argument."""
    if isinstance(workflow, Workflow):
        return workflow.name, workflow
    if not isinstance(workflow, str) or not workflow:
        raise TypeError(f"workflow must be a conveyor.Workflow or its name, got {workflow!r}")
    return workflow, None


def open_ledger(conn_id: str | None, declaration: Workflow | None, context: Context | None) -> Ledger:
    """The ledger, with the workflow's declaration stored in it (once per process and version)."""
    from conveyor.ledger.actors import task_actor
    from conveyor.ledger.hook import LedgerHook

    # A task rides out a short ledger restart instead of failing a try for it (the hook's default).
    ledger = LedgerHook(conn_id).get_ledger()
    if declaration is not None:
        ledger.declare(declaration, actor=task_actor(context) if context is not None else None)
    return ledger


class LedgerStepOperator(BaseOperator):
    """A step of a workflow that reads and moves its run's items in the ledger.

    :param workflow: the workflow: its :class:`~conveyor.workflow.Workflow` declaration (stored in
        the ledger when the task runs), or the name of one already stored.
    :param ledger_conn_id: the Airflow connection of the ledger (default ``[conveyor] ledger_conn_id``).
    """

    #: True when ``execute()`` works on the run's items still in its input status, moving each once,
    #: so it may run again for items that reach that status after it ran: a review step does that
    #: for corrected input validated again after this step (see :mod:`conveyor.review.catch_up`).
    resumable: ClassVar[bool] = False

    def __init__(self, *, workflow: str | Workflow, ledger_conn_id: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.workflow, self.declaration = workflow_parts(workflow)
        self.ledger_conn_id = ledger_conn_id

    def ledger(self, context: Context | None = None) -> Ledger:
        """The ledger (resolved when the task runs, never at DAG parse time), the workflow declared."""
        return open_ledger(self.ledger_conn_id, self.declaration, context)
