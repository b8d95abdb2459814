"""A shard's side of a sharded AI step: claiming chunks, keeping their leases, letting them go.

Several task instances of one AI step (``AIStepOperator.partial(...).expand(shard=[...])``) share
one run's items. Each runs an :class:`~conveyor.ai.runner.AIStepRunner` whose chunks come from
:class:`ShardClaims` instead of a list read at the start: one claim per chunk through
:meth:`conveyor.ledger.Ledger.claim_chunk` (see :mod:`conveyor.ledger.leases` for the statement
and the rules of who may take which lease).

- **Claim**: up to ``batch_size`` waiting items no live lease keeps. When none is left but a
  sibling still holds live leases on waiting items, the shard polls until they moved or the
  leases expired (the sibling was killed: its chunk is taken over), so when the last shard ends
  every item of the run was handled.
- **Renew**: every third of ``lease_seconds`` while the runner works, all of this attempt's
  leases (its chunk in flight, the one read ahead, the items it deferred).
- **Release**: a chunk's leases once its items moved; everything left when the attempt ends.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypedDict

if TYPE_CHECKING:
    from conveyor.ai.definitions import ItemView
    from conveyor.ledger.leases import Holder
    from conveyor.ledger.store import Ledger

log = logging.getLogger(__name__)


class _Scope(TypedDict):
    """Whose leases: the keyword arguments every lease call of one shard shares."""

    workflow: str
    run_id: str
    status: str
    step: str
    holder: Holder


class ShardClaims:
    """The leases of one attempt of one shard on one step of one run.

    :param ledger: the item ledger.
    :param workflow: the workflow of the items.
    :param run_id: the run whose items are shared.
    :param status: where the items wait (the step's from-status).
    :param step: the step (its task id): leases are per step.
    :param holder: this task instance and its attempt.
    :param batch_size: items per claim.
    :param lease_seconds: how long a lease lasts without renewal.
    :param poll_interval: seconds between looks at the siblings' live leases.
    """

    def __init__(
        self,
        ledger: Ledger,
        *,
        workflow: str,
        run_id: str,
        status: str,
        step: str,
        holder: Holder,
        batch_size: int,
        lease_seconds: float,
        poll_interval: float = 1.0,
    ) -> None:
        self.ledger = ledger
        self.holder = holder
        self.step = step
        self.batch_size = batch_size
        self.lease_seconds = lease_seconds
        self.poll_interval = poll_interval
        self.claimed = 0
        self._where = _Scope(workflow=workflow, run_id=run_id, status=status, step=step, holder=holder)
        self._stopping = threading.Event()

    def next_chunk(self, load: Callable[[Sequence[str]], list[ItemView]]) -> list[ItemView] | None:
        """The next claimed chunk's waiting items (read with ``load``), or None when nothing is
        left for this shard. Blocking: call it in a thread."""
        while not self._stopping.is_set():
            claim = self.ledger.claim_chunk(**self._where, limit=self.batch_size, lease_seconds=self.lease_seconds)
            if claim.item_ids:
                self.claimed += len(claim.item_ids)
                views = load(claim.item_ids)
                if views:
                    return views
                continue  # all moved meanwhile (a sibling's late commit): claim again
            if claim.picked:
                continue  # a sibling's lease, committed meanwhile, won them: the next look sees it
            if not self.ledger.leased_elsewhere(**self._where):
                return None
            self._stopping.wait(self.poll_interval)
        return None

    def stop(self) -> None:
        """Make a :meth:`next_chunk` in progress return at once (the step stops)."""
        self._stopping.set()

    async def keep(self) -> None:
        """Renew this attempt's leases every third of their length, until cancelled."""
        while True:
            await asyncio.sleep(self.lease_seconds / 3)
            try:
                await asyncio.to_thread(self.ledger.renew_leases, self.step, self.holder, self.lease_seconds)
            except Exception as exc:  # a missed renewal costs at most a sibling's repeat of a chunk
                log.warning("Could not renew the step's leases: %s", exc)

    def release(self, item_ids: Sequence[str] | None = None) -> None:
        """Drop the leases of ``item_ids`` (they moved), or all of this attempt's when None."""
        if item_ids is None or item_ids:
            self.ledger.release_leases(self.step, self.holder, item_ids)
