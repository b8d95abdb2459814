"""HumanReviewSensor: wait until every item of the run that needs a person has a decision.

A sensor that only waits, as the standard provider's: ``deferrable`` defaults from
``[operators] default_deferrable`` (Conveyor's deployment files turn it on). Deferred, after one
look at the ledger it hands the wait to :class:`~conveyor.review.triggers.HumanReviewTrigger` and
holds no worker slot. Not deferred (a deployment without a triggerer), it runs in
``mode="reschedule"`` unless another mode is asked for: it frees its slot between looks, one
cheap query each, and a wait of hours never holds a worker.

:meth:`HumanReviewSensor.poke` only looks (one indexed count). The work a look waits on, done
before each look, is the step's own and visible in its log and summary: corrected items
validated again and caught up with the run, overdue items escalated. It runs in ``execute`` (each
try of a rescheduled sensor) and in ``execute_complete`` (when the trigger wakes the task), never
inside ``poke``.

**Corrections are validated again before the review counts as done.** An item a reviewer
corrected (``corrected``) is gated again, in the worker, by the validation gate that quarantined it
(see :mod:`conveyor.review.revalidation`): passing items move to the gate's output status, where
the run's later steps pick them up; failing ones go back to the queue with the new reason, and
the sensor waits on. The trigger wakes the sensor as soon as a correction is seen.

At the timeout the sensor applies the escalation declared for the step:

* ``fail``: the task fails (``AirflowSensorTimeout``, no retry), so the task's failure callback
  alerts a person; the items stay on the queue;
* ``proceed``: the task succeeds; downstream steps work on the approved items only, the others
  stay on the queue;
* ``reject``: every item still waiting is moved to ``rejected`` with the reason, then the task
  succeeds.

Each item can also be escalated on its own (``item_timeout``, ``item_escalation``): an item that
has waited that long on the queue is alerted about (``alert``: a person is told, it keeps
waiting), rejected (``reject``) or fails the step (``fail``); see :mod:`conveyor.review.item_escalation`.
The trigger fires at the moment the oldest waiting item becomes overdue, not on a poll tick.

The outcome is logged and returned as the XCom summary (``return_value``, also pushed under the
key ``review_summary`` when the task fails): a :class:`~conveyor.review.review_summary.ReviewSummary`.

A row corrected at a later review step (after the AI step), once validated again, goes through the
resumable steps between its gate and this step before the review counts as done (see
:mod:`conveyor.review.catch_up`), so it is processed by the same run instead of left behind.

Report-level sign-off (one decision for a whole report) is :class:`~conveyor.review.operators.SignOffOperator`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseSensorOperator
from airflow.sdk.exceptions import AirflowException, AirflowRescheduleException, AirflowSensorTimeout

if TYPE_CHECKING:
    from airflow.sdk import Context

    from conveyor.ledger.store import Ledger
    from conveyor.workflow import Workflow

XCOM_KEY = "review_summary"


class Escalation(StrEnum):
    """What the sensor does when its timeout passes with items still waiting for a person."""

    FAIL = "fail"
    PROCEED = "proceed"
    REJECT = "reject"


class HumanReviewSensor(BaseSensorOperator):
    """Wait until no item of ``(workflow, run_id)`` is quarantined or pending review.

    :param workflow: the workflow whose items are reviewed: its :class:`~conveyor.workflow.Workflow`
        or its name (templated).
    :param run_id: the run that carries the items (templated; default: this DAG run's id).
    :param escalation: ``fail``, ``proceed`` or ``reject``: what to do at the timeout.
    :param item_timeout: how long one item may wait on the queue (``timedelta`` or seconds) before
        ``item_escalation`` applies to it (None: items are escalated only with the run, at ``timeout``).
    :param item_escalation: ``alert`` (tell a person, the item keeps waiting), ``reject`` or
        ``fail``: what to do with an item that waited longer than ``item_timeout``.
    :param revalidate: the task id of the validation gate that validates corrected items again
        (default: the gate each item's quarantine recorded).
    :param deferrable: wait in the triggerer, holding no worker slot (default: ``[operators]
        default_deferrable``; False when ``mode="reschedule"`` is asked for). Not deferrable, the
        sensor reschedules between looks unless ``mode`` says otherwise.
    :param poke_interval: seconds between two looks at the ledger (default
        ``[conveyor] review_poke_seconds``).
    :param timeout: seconds to wait before escalating (Airflow's sensor timeout).
    :param conn_id: the Airflow connection of the ledger (default ``[conveyor] ledger_conn_id``).
    """

    template_fields: Sequence[str] = ("workflow", "run_id")
    ui_color = "#fdf2d0"

    def __init__(
        self,
        *,
        workflow: str | Workflow,
        run_id: str = "{{ run_id }}",
        escalation: Escalation | str = Escalation.FAIL,
        revalidate: str | None = None,
        item_timeout: timedelta | float | None = None,
        item_escalation: str = "alert",
        deferrable: bool | None = None,
        conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        from conveyor import config
        from conveyor.ledger_step import workflow_parts

        kwargs.setdefault("poke_interval", config.get_int("review_poke_seconds"))
        if deferrable is None:
            deferrable = kwargs.get("mode", "poke") != "reschedule" and _default_deferrable()
        if not deferrable:
            # Never a worker slot held for a wait measured in hours.
            kwargs.setdefault("mode", "reschedule")
        super().__init__(**kwargs)
        try:
            self.escalation = Escalation(escalation)
        except ValueError:
            raise ValueError(
                f"escalation must be one of {', '.join(e.value for e in Escalation)}; got {escalation!r}"
            ) from None
        if deferrable and self.mode == "reschedule":
            raise ValueError(
                "choose deferrable=True (triggerer) or mode='reschedule' (no triggerer), not both"
            )
        from conveyor.review.item_escalation import ItemEscalation

        try:
            self.item_escalation = ItemEscalation(item_escalation)
        except ValueError:
            raise ValueError(
                f"item_escalation must be one of {', '.join(e.value for e in ItemEscalation)}; "
                f"got {item_escalation!r}"
            ) from None
        if isinstance(item_timeout, timedelta):
            item_timeout = item_timeout.total_seconds()
        if item_timeout is not None and item_timeout <= 0:
            raise ValueError(f"item_timeout must be positive, got {item_timeout!r}")
        self.item_timeout = float(item_timeout) if item_timeout is not None else None
        self.workflow, self.declaration = workflow_parts(workflow)
        self.run_id = run_id
        self.revalidate = revalidate
        self.deferrable = deferrable
        self.conn_id = conn_id or config.ledger_conn_id()
        #: steps run again for corrected items (step -> its summary), reported in the outcome
        self.caught_up: dict[str, Any] = {}

    # -- waiting -----------------------------------------------------------------------------

    def _ledger(self) -> Ledger:
        from conveyor.ledger.hook import LedgerHook

        return LedgerHook(self.conn_id, application_name=f"conveyor-sensor:{self.task_id}").get_ledger()

    def _pending(self) -> int:
        from conveyor.review.run_state import pending_count

        return pending_count(self._ledger(), self.workflow, self.run_id)

    def _revalidate(self, context: Context) -> None:
        """Gate the run's corrected items again (nothing to do: one indexed look-up)."""
        from conveyor.review.revalidation import RevalidationError, describe, revalidate

        try:
            result = revalidate(
                self._ledger(), context, workflow=self.workflow, run_id=self.run_id, gate=self.revalidate
            )
        except RevalidationError as exc:
            raise AirflowException(str(exc)) from exc
        if result["corrected"]:
            self.log.info("%s", describe(result))
        if result["validated"]:
            self._catch_up(context, result["gates"])

    def _catch_up(self, context: Context, gates: list[str]) -> None:
        """Take the rows that passed again through the steps between their gate and this one."""
        from conveyor.review.catch_up import catch_up

        done = catch_up(context, gates)
        self.log.info("corrected items: %s", done.describe())
        if done.skipped:
            self.log.warning("corrected items passed %s again; %s", ", ".join(gates), done.describe())
        self.caught_up.update(done.ran)

    def _escalate_items(self, context: Context) -> None:
        """Escalate, once each, the items that waited longer than ``item_timeout``."""
        if self.item_timeout is None:
            return
        from airflow.sdk.exceptions import AirflowFailException

        from conveyor.ledger.actors import task_actor
        from conveyor.monitoring.notifiers import ChannelNotConfigured
        from conveyor.review.item_escalation import ItemsOverdue, escalate_items

        try:
            done = escalate_items(
                self._ledger(),
                workflow=self.workflow,
                run_id=self.run_id,
                step=self.task_id,
                item_timeout=self.item_timeout,
                action=self.item_escalation,
                actor=task_actor(context),
                context=context,
            )
        except ItemsOverdue as exc:
            raise AirflowFailException(str(exc)) from None
        except (ChannelNotConfigured, RuntimeError) as exc:
            # Nothing was recorded: the step fails (and retries) rather than wait on in silence.
            raise AirflowException(f"item escalation 'alert' reached nobody: {exc}") from None
        if done:
            self.log.warning(
                "item escalation %r applied to %d item(s): %s",
                self.item_escalation.value,
                len(done),
                ", ".join(o.item_id for o in done[:10]),
            )

    def _before_looking(self, context: Context) -> None:
        """What a look waits on, done first: corrections validated again (and caught up with the
        run), overdue items escalated. Called by ``execute`` and ``execute_complete``, not ``poke``."""
        self._revalidate(context)
        self._escalate_items(context)

    def poke(self, context: Context) -> bool:
        """True when no item of the run waits for a person (it only looks: one indexed count)."""
        pending = self._pending()
        self.log.info("%d item(s) of %s/%s wait for a person", pending, self.workflow, self.run_id)
        return pending == 0

    def _started_at(self, context: Context) -> datetime:
        if self.reschedule:
            first = context["ti"].get_first_reschedule_date(context)
            if first is not None:
                return first.astimezone(UTC)
        return datetime.now(UTC)

    def execute(self, context: Context) -> dict[str, Any]:
        started = self._started_at(context)
        deadline = started + timedelta(seconds=self.timeout)
        if self.deferrable:
            self._before_looking(context)
            if self.poke(context):
                return self._finish(context, started, deadline, timed_out=False)
            if datetime.now(UTC) >= deadline:
                return self._finish(context, started, deadline, timed_out=True)
            self._defer(deadline)
        while True:
            self._before_looking(context)
            if self.poke(context):
                return self._finish(context, started, deadline, timed_out=False)
            now = datetime.now(UTC)
            if now >= deadline:
                return self._finish(context, started, deadline, timed_out=True)
            wake = min(now + timedelta(seconds=self.poke_interval), deadline)
            if self.reschedule:
                raise AirflowRescheduleException(wake)
            time.sleep(max((wake - now).total_seconds(), 0.0))

    def _defer(self, deadline: datetime) -> None:
        from conveyor.review.triggers import HumanReviewTrigger

        self.log.info("deferring until every item has a decision or %s", deadline.isoformat())
        self.defer(
            trigger=HumanReviewTrigger(
                workflow=self.workflow,
                run_id=self.run_id,
                deadline=deadline,
                poll_interval=self.poke_interval,
                conn_id=self.conn_id,
                step=self.task_id if self.item_timeout else None,
                item_timeout=self.item_timeout,
            ),
            method_name="execute_complete",
        )

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> dict[str, Any]:
        """Resume after the trigger fired: finish, wait again, or escalate."""
        from conveyor.review.triggers import CORRECTED, DECIDED, ERROR, ITEMS_OVERDUE, TIMED_OUT, parse_deadline

        status = (event or {}).get("status")
        if status == ERROR:
            raise AirflowException(f"review of {self.workflow}/{self.run_id} could not be watched: {event}")
        if not event or status not in {DECIDED, CORRECTED, ITEMS_OVERDUE, TIMED_OUT}:
            raise AirflowException(f"unexpected event from the review trigger: {event!r}")
        deadline = parse_deadline(event.get("deadline")) or datetime.now(UTC)
        started = deadline - timedelta(seconds=self.timeout)
        timed_out = event["status"] == TIMED_OUT
        if not timed_out:
            self._before_looking(context)
        if not timed_out and not self.poke(context):
            if datetime.now(UTC) < deadline:
                # A correction failed its revalidation, overdue items were escalated and wait on, or
                # a new item was routed to review after the trigger's last look: keep waiting.
                self._defer(deadline)
            # Woken for a correction or an overdue item just as the deadline passed, with items
            # still waiting: the step's escalation applies, as it would have on the trigger's deadline.
            timed_out = status in {CORRECTED, ITEMS_OVERDUE}
        return self._finish(context, started, deadline, timed_out=timed_out)

    # -- the outcome -------------------------------------------------------------------------

    def _item_escalations(self, ledger: Ledger) -> dict[str, int]:
        if self.item_timeout is None:
            return {}
        return _item_escalations_of(ledger, self.workflow, self.run_id, self.task_id)

    def _finish(
        self, context: Context, started: datetime, deadline: datetime, *, timed_out: bool
    ) -> dict[str, Any]:
        from conveyor.ledger.actors import task_actor
        from conveyor.ledger.statuses import REVIEW_VALUES, Status
        from conveyor.review.review_summary import ReviewSummary, human_duration
        from conveyor.review.run_state import read_run_state

        self._revalidate(context)  # nothing corrected is left unvalidated, whatever the outcome
        ledger = self._ledger()
        state = read_run_state(ledger, self.workflow, self.run_id)
        applied: Escalation | None = None
        auto_rejected = 0
        if timed_out and state.pending:
            # The deadline passed with items still waiting: the step's declared escalation applies.
            applied = self.escalation
            if applied is Escalation.REJECT:
                waited = human_duration(self.timeout)
                result = ledger.transition(
                    self.workflow,
                    state.pending,
                    to_status=Status.REJECTED,
                    actor=task_actor(context),
                    from_status=REVIEW_VALUES,
                    reason=f"no review decision within {waited}: rejected by the step's escalation",
                )
                auto_rejected = len(result.moved)
                state = read_run_state(ledger, self.workflow, self.run_id)
        outcome = ReviewSummary.of(
            state,
            escalation=self.escalation.value,
            escalation_applied=applied.value if applied else None,
            auto_rejected=auto_rejected,
            item_escalations=self._item_escalations(ledger),
            caught_up=sorted(self.caught_up),
            waited_seconds=round((datetime.now(UTC) - started).total_seconds(), 3),
            deadline=deadline.isoformat(),
        )
        summary = outcome.as_xcom()
        message = outcome.describe()
        if applied is Escalation.FAIL:
            self.log.error("%s", message)
            context["ti"].xcom_push(key=XCOM_KEY, value=summary)
            raise AirflowSensorTimeout(message)
        if applied is not None:
            self.log.warning("%s", message)
        else:
            self.log.info("%s", message)
        if timed_out and applied is None:
            self.log.info("the deadline passed, but every item had a decision by then")
        elif state.pending:
            self.log.info("%d item(s) were routed to review after the last look", len(state.pending))
        return summary


def _default_deferrable() -> bool:
    from airflow.sdk.configuration import conf

    return bool(conf.getboolean("operators", "default_deferrable", fallback=False))


def _item_escalations_of(ledger: Ledger, workflow: str, run_id: str, step: str) -> dict[str, int]:
    from conveyor.ledger import review_escalations

    with ledger.connect() as conn:
        return review_escalations.counts_by_action(conn, workflow, run_id, step)
