"""One ``dag.test()`` run of a bundled DAG, around two things Airflow 3.3.2's ``dag.test()`` gets wrong.

The quickstart and the suite's workflow tests run the bundled DAGs with :func:`run_dag_test`, the
one way either of them starts a run in process.

1. **Deadline Alerts** (:func:`deadlines_left_to_the_scheduler`): a run of a DAG that declares one
   cannot finish under ``dag.test()``.
2. **A sign-off answered as it parks is lost** (:class:`AnsweredPromptsResumed`): the task's own
   process parks it in ``awaiting_input`` through the Execution API; only when that process has
   ended does ``dag.test()`` write the same state again from its own copy of the task instance. A
   person who answers in between gets a 200: the API records the answer and moves the task to
   ``scheduled`` in one transaction, and ``dag.test()``'s late write puts it back in
   ``awaiting_input``, answered. Nothing resumes an answered task, the answer cannot be given
   twice (409), and the run waits forever (seen: a suite worker stuck 16 minutes in a sign-off
   test, its main thread in ``dag.test()``'s wait loop). A scheduler-run deployment has no second
   writer; there the answer resumes the task as it should.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

log = logging.getLogger(__name__)

__all__ = ["AnsweredPromptsResumed", "deadlines_left_to_the_scheduler", "manual_run_id", "orm_ready", "run_dag_test"]


@contextmanager
def deadlines_left_to_the_scheduler(dag: Any) -> Iterator[None]:
    """Run ``dag.test()`` without the DAG's Deadline Alerts.

    Airflow 3.3.2's ``dag.test()`` cannot finish a run of a DAG that declares a ``DeadlineAlert``:
    when the run succeeds, ``DagRun.update_state`` looks the alerts up by id, but the DAG that
    ``dag.test()`` builds holds them serialized (``psycopg2.ProgrammingError: can't adapt type
    'dict'``). Deadlines are evaluated by the scheduler, never by ``dag.test()``, so nothing
    observable is lost; a scheduled run keeps them.
    """
    saved = dag.deadline
    dag.deadline = None
    try:
        yield
    finally:
        dag.deadline = saved


class AnsweredPromptsResumed(threading.Thread):
    """While a ``dag.test()`` run lasts, resume each of its tasks that waits in ``awaiting_input``
    although its Human-in-the-loop prompt was answered.

    It resumes them the way the API's answer handler does (``handle_event_submit`` with the
    answer as the event, the task instance locked before its prompt, as the handler locks them), so
    the task's ``execute_complete`` gets the answer the person gave, once.

    :param dag_id: the run's DAG.
    :param run_id: the run ``dag.test()`` creates.
    :param interval: seconds between two looks.
    """

    def __init__(self, dag_id: str, run_id: str, interval: float = 1.0) -> None:
        super().__init__(name=f"prompts-resumed-{dag_id}", daemon=True)
        self.dag_id = dag_id
        self.run_id = run_id
        self.interval = interval
        self.stopped = threading.Event()
        #: task ids resumed here, in order (a task resumed twice was overwritten twice)
        self.resumed: list[str] = []

    def run(self) -> None:
        while not self.stopped.wait(self.interval):
            try:
                self.resume_answered()
            except Exception:  # the metadata DB may be busy: look again next time
                log.warning("could not look for answered prompts of %s", self.run_id, exc_info=True)

    def start(self) -> None:
        """Start looking, once Airflow's ORM is set up in the calling thread (see :func:`orm_ready`)."""
        orm_ready()
        super().start()

    def stop(self) -> None:
        self.stopped.set()
        self.join(timeout=30)

    def resume_answered(self) -> list[str]:
        """Resume the run's answered tasks still parked; returns their task ids."""
        from airflow.models.hitl import HITLDetail
        from airflow.models.taskinstance import TaskInstance
        from airflow.models.trigger import handle_event_submit
        from airflow.triggers.base import TriggerEvent
        from airflow.utils.session import create_session
        from airflow.utils.state import TaskInstanceState
        from sqlalchemy import select

        resumed = []
        with create_session() as session:
            parked = session.scalars(
                select(TaskInstance)
                .join(HITLDetail, HITLDetail.ti_id == TaskInstance.id)
                .where(TaskInstance.dag_id == self.dag_id, TaskInstance.run_id == self.run_id,
                       TaskInstance.state == TaskInstanceState.AWAITING_INPUT, HITLDetail.responded_at.is_not(None))
                .with_for_update(of=TaskInstance)
            ).all()
            for ti in parked:
                detail = session.scalars(
                    select(HITLDetail).where(HITLDetail.ti_id == ti.id).with_for_update(of=HITLDetail)
                ).one()
                event = TriggerEvent(detail.as_resume_event_payload())
                handle_event_submit(event, task_instance=ti, session=session)
                resumed.append(ti.task_id)
        for task_id in resumed:
            log.warning("%s of %s was answered but left waiting by dag.test(): resumed with the answer",
                        task_id, self.run_id)
        self.resumed += resumed
        return resumed


def orm_ready() -> None:
    """Import every Airflow model and configure SQLAlchemy's mappers in the calling thread.

    A thread that queries the metadata DB while another imports Airflow's models can deadlock the
    process (seen: a quickstart under load stuck 15 minutes before its first task). The query's
    thread configures the mappers, holding SQLAlchemy's configure lock, and its configure hook
    (``import_all_models``) waits for a model module that the main thread is importing, inside
    ``dag.test()``'s serialization; the main thread, declaring that module's model, waits for the
    configure lock. Python sees only one of the two locks, so it cannot break the cycle. Once every
    model is imported and configured first, a later query has nothing to configure.
    """
    import airflow.models.hitl
    import airflow.models.taskinstance
    import airflow.models.trigger
    import airflow.triggers.base
    import airflow.utils.session
    import airflow.utils.state  # noqa: F401 - the resumer's own imports, done here for the same reason
    from airflow.models import import_all_models
    from sqlalchemy.orm import configure_mappers

    import_all_models()
    configure_mappers()


def manual_run_id(when: datetime) -> str:
    """The id ``dag.test()`` gives the run it starts at ``when``: the run the people watching it look for."""
    from airflow.models.dagrun import DagRun
    from airflow.utils.types import DagRunType

    return DagRun.generate_run_id(run_type=DagRunType.MANUAL, logical_date=when, run_after=when)


def run_dag_test(dag: Any, when: datetime, conf: dict[str, Any] | None = None) -> Any:
    """``dag.test()`` of ``dag`` at ``when`` (its logical date and run-after), with ``conf``; the
    DagRun it ends with, whose id is :func:`manual_run_id` of ``when``."""
    import pendulum

    resumer = AnsweredPromptsResumed(dag.dag_id, manual_run_id(when))
    resumer.start()
    try:
        with deadlines_left_to_the_scheduler(dag):
            return dag.test(logical_date=pendulum.instance(when), run_after=pendulum.instance(when), run_conf=conf)
    finally:
        resumer.stop()
