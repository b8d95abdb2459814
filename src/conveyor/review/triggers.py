"""The trigger of :class:`~conveyor.review.sensors.HumanReviewSensor`: waits in the triggerer.

It asks the ledger, on every poll tick, how many items of its run still wait for a person (one
cheap indexed count, batched with every other review trigger of the same triggerer, see
:mod:`conveyor.review.pending_counter`). It fires when none are left, when a reviewer corrected an
item (the sensor validates it again in a worker, then waits on), when an item has waited longer
than the step's ``item_timeout`` (the sensor escalates it, then waits on), or when its deadline
passes. Between looks it sleeps until the next tick, a reviewer's decision on its run, or the
moment the oldest waiting item becomes overdue, whichever comes first.

Everything it needs is in its serialized kwargs (the deadline is absolute), so a triggerer that
restarts recreates it from them and it carries on where it was.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from conveyor.ledger.connection import CONN_ID

#: Event statuses the trigger yields.
DECIDED = "decided"
CORRECTED = "corrected"
ITEMS_OVERDUE = "items_overdue"
TIMED_OUT = "timed_out"
ERROR = "error"


def parse_deadline(value: datetime | str | None) -> datetime | None:
    """A tz-aware UTC deadline from a datetime or an ISO 8601 string (None: wait forever)."""
    if value is None or value == "":
        return None
    moment = datetime.fromisoformat(value) if isinstance(value, str) else value
    if moment.tzinfo is None:
        raise ValueError(f"the review deadline must be timezone-aware, got {value!r}")
    return moment.astimezone(UTC)


class HumanReviewTrigger(BaseTrigger):
    """Fires when no item of ``(workflow, run_id)`` waits for a person, or at the deadline.

    :param workflow: the workflow whose items are reviewed (the DAG id of the bundled DAGs).
    :param run_id: the run that carries the items.
    :param deadline: when to stop waiting (tz-aware datetime or ISO string); None waits forever.
    :param poll_interval: seconds between two looks at the ledger (ticks aligned to the wall clock).
    :param conn_id: the Airflow connection of the ledger.
    :param step: the review step's task id (whose item escalations count as done).
    :param item_timeout: seconds an item may wait before the trigger fires for its escalation
        (None: items are not watched one by one).
    """

    def __init__(
        self,
        *,
        workflow: str,
        run_id: str,
        deadline: datetime | str | None = None,
        poll_interval: float = 60.0,
        conn_id: str = CONN_ID,
        step: str | None = None,
        item_timeout: float | None = None,
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # BaseTrigger.__init__ is unannotated
        if poll_interval <= 0:
            raise ValueError("poll_interval must be positive")
        if item_timeout is not None and (item_timeout <= 0 or not step):
            raise ValueError("item_timeout must be positive and needs the review step's task id (step)")
        self.workflow = workflow
        self.run_id = run_id
        self.deadline = parse_deadline(deadline)
        self.poll_interval = float(poll_interval)
        self.conn_id = conn_id
        self.step = step
        self.item_timeout = float(item_timeout) if item_timeout is not None else None

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "conveyor.review.triggers.HumanReviewTrigger",
            {
                "workflow": self.workflow,
                "run_id": self.run_id,
                "deadline": self.deadline.isoformat() if self.deadline else None,
                "poll_interval": self.poll_interval,
                "conn_id": self.conn_id,
                "step": self.step,
                "item_timeout": self.item_timeout,
            },
        )

    def _event(self, status: str, **extra: Any) -> TriggerEvent:
        deadline = self.deadline.isoformat() if self.deadline else None
        return TriggerEvent(
            {
                "status": status,
                "workflow": self.workflow,
                "run_id": self.run_id,
                "deadline": deadline,
                **extra,
            }
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from asgiref.sync import sync_to_async

        from conveyor.ledger.connection import resolve_dsn
        from conveyor.review.pending_counter import next_tick, shared_counter

        try:
            # May ask Airflow's secrets backends: run it off the event loop, as the triggerer requires.
            dsn = await sync_to_async(resolve_dsn)(None, conn_id=self.conn_id)
        except Exception as exc:
            yield self._event(ERROR, message=f"cannot resolve the ledger connection {self.conn_id!r}: {exc}")
            return

        polls = 0
        failures = 0
        event: TriggerEvent
        # The shared connection is released before the event goes out.
        async with shared_counter(dsn) as counter:
            while True:
                pending: int | None
                try:
                    pending = await counter.pending(
                        self.workflow, self.run_id, self.step if self.item_timeout else None
                    )
                    polls += 1
                    failures = 0
                except Exception as exc:
                    # A ledger outage must not end the wait: look again on the next tick.
                    pending = None
                    failures += 1
                    self.log.warning(
                        "ledger poll failed (%d in a row), retrying next tick: %s", failures, exc
                    )
                if pending == 0:
                    self.log.info("every item of %s/%s has a decision", self.workflow, self.run_id)
                    event = self._event(DECIDED, pending=0, polls=polls)
                    break
                corrected = getattr(pending, "corrected", 0)
                if corrected:
                    self.log.info("%d corrected item(s) of %s/%s to validate again", corrected, self.workflow,
                                  self.run_id)  # fmt: skip
                    event = self._event(CORRECTED, pending=int(pending or 0), corrected=corrected, polls=polls)
                    break
                now = datetime.now(UTC)
                oldest = getattr(pending, "oldest", None)
                overdue_at = oldest + timedelta(seconds=self.item_timeout) if oldest and self.item_timeout else None
                if overdue_at is not None and now >= overdue_at:
                    self.log.info("an item of %s/%s has waited since %s: escalate it", self.workflow, self.run_id,
                                  oldest)  # fmt: skip
                    event = self._event(ITEMS_OVERDUE, pending=int(pending or 0), polls=polls)
                    break
                if self.deadline is not None and now >= self.deadline:
                    self.log.info("review deadline %s passed with %s item(s) waiting", self.deadline, pending)
                    event = self._event(TIMED_OUT, pending=pending, polls=polls)
                    break
                delay = next_tick(self.poll_interval)
                for moment in (self.deadline, overdue_at):
                    if moment is not None:
                        delay = min(delay, max((moment - now).total_seconds(), 0.0) + 0.001)
                self.log.debug(
                    "%s item(s) of %s/%s waiting; next look in %.1fs",
                    pending,
                    self.workflow,
                    self.run_id,
                    delay,
                )
                # A reviewer's decision on this run wakes it at once (LISTEN/NOTIFY); else the tick.
                await counter.wait_for_change(self.workflow, self.run_id, delay)
        yield event
