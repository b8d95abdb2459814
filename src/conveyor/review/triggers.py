"""The trigger of :class:`~conveyor.review.sensors.HumanReviewSensor`: waits in the triggerer.

It asks the ledger, on every poll tick, how many items of its run still wait for a person (one
cheap indexed count, batched with every other review trigger of the same triggerer, see
:mod:`conveyor.review.pending_counter`). It fires when none are left, when a reviewer corrected an
item (the sensor validates it again in a worker, then waits on), or when its deadline passes.

Everything it needs is in its serialized kwargs (the deadline is absolute), so a triggerer that
restarts recreates it from them and it carries on where it was.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from conveyor.ledger.connection import CONN_ID

#: Event statuses the trigger yields.
DECIDED = "decided"
CORRECTED = "corrected"
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
    """

    def __init__(
        self,
        *,
        workflow: str,
        run_id: str,
        deadline: datetime | str | None = None,
        poll_interval: float = 60.0,
        conn_id: str = CONN_ID,
    ) -> None:
        super().__init__()
        if poll_interval <= 0:
            raise ValueError("poll_interval must be positive")
        self.workflow = workflow
        self.run_id = run_id
        self.deadline = parse_deadline(deadline)
        self.poll_interval = float(poll_interval)
        self.conn_id = conn_id

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "conveyor.review.triggers.HumanReviewTrigger",
            {
                "workflow": self.workflow,
                "run_id": self.run_id,
                "deadline": self.deadline.isoformat() if self.deadline else None,
                "poll_interval": self.poll_interval,
                "conn_id": self.conn_id,
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
                    pending = await counter.pending(self.workflow, self.run_id)
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
                    event = self._event(CORRECTED, pending=int(pending), corrected=corrected, polls=polls)
                    break
                now = datetime.now(UTC)
                if self.deadline is not None and now >= self.deadline:
                    self.log.info("review deadline %s passed with %s item(s) waiting", self.deadline, pending)
                    event = self._event(TIMED_OUT, pending=pending, polls=polls)
                    break
                delay = next_tick(self.poll_interval)
                if self.deadline is not None:
                    delay = min(delay, max((self.deadline - now).total_seconds(), 0.0) + 0.001)
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
