"""How many items of a run still wait for a person, asked by many triggers in one triggerer.

A triggerer runs hundreds of triggers in one event loop. Opening a connection per trigger (or per
poll) would cost the database a backend each; so every review trigger of one event loop shares one
:class:`PendingCounter` per ledger DSN: one ``psycopg.AsyncConnection``, and one query that answers
all the questions asked within a short batching window. Review triggers also poll on ticks aligned
to the wall clock (see :func:`next_tick`), so triggers with the same interval ask together: the
ledger sees one cheap, indexed query per interval, whatever the number of waiting runs.

Between ticks a trigger does not sleep blindly: it waits on :meth:`PendingCounter.wait_for_change`,
which a second shared connection wakes with ``LISTEN conveyor_review``. Every reviewer decision
sends ``NOTIFY conveyor_review, '<workflow>\x1f<run id>'`` (:meth:`conveyor.ledger.Ledger.notify_review`),
so the triggers of that run look again at once (their look is batched as usual); the others are
not woken. Listening costs one idle backend per triggerer and no query; if it fails, triggers fall
back to their poll ticks.

The connections are closed when the last trigger using them leaves.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime

import psycopg

from conveyor.ledger import run_waits
from conveyor.ledger.statuses import UNRESOLVED_VALUES, Status

log = logging.getLogger(__name__)

_UNRESOLVED_VALUES: list[str] = UNRESOLVED_VALUES

#: (workflow, run id, step watching item ages or "")
Key = tuple[str, str, str]

#: After the listener fails, triggers only poll for this long before it is tried again.
LISTEN_RETRY_SECONDS = 30.0


class PendingCount(int):
    """Items of a run not resolved yet (an ``int``); ``corrected`` of them wait for revalidation;
    ``oldest`` is when the longest-waiting item the asking step has not escalated yet entered the
    queue (only for a step that watches item ages)."""

    corrected: int
    oldest: datetime | None

    def __new__(cls, waiting: int = 0, corrected: int = 0, oldest: datetime | None = None) -> PendingCount:
        count = super().__new__(cls, waiting + corrected)
        count.corrected = corrected
        count.oldest = oldest
        return count


def next_tick(interval: float, now: float | None = None) -> float:
    """Seconds until the next multiple of ``interval`` on the wall clock (never zero)."""
    now = time.time() if now is None else now
    nxt = math.floor(now / interval + 1) * interval
    return max(nxt - now, 0.001)


class PendingCounter:
    """Batched pending-review counts over one shared asynchronous connection.

    :param dsn: the ledger's libpq DSN.
    :param batch_window: seconds to wait for more questions before sending a batch.
    """

    #: statements sent by every counter of this process (for the benchmark)
    total_queries = 0

    def __init__(self, dsn: str, *, batch_window: float = 0.05) -> None:
        self.dsn = dsn
        self.batch_window = batch_window
        #: statements sent to the ledger so far (for tests and the benchmark)
        self.queries = 0
        self.users = 0
        self._conn: psycopg.AsyncConnection | None = None
        self._waiting: dict[Key, list[asyncio.Future[PendingCount]]] = {}
        self._flush: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        #: runs whose triggers wait for a change -> their wake-up events
        self._watchers: dict[tuple[str, str], set[asyncio.Event]] = {}
        self._listener: asyncio.Task[None] | None = None
        #: notifications received (for tests)
        self.notifications = 0
        self._listen_again_at = 0.0

    async def wait_for_change(self, workflow: str, run_id: str, timeout: float) -> bool:
        """Wait until a decision on the run is announced, or ``timeout`` seconds; True when woken."""
        self._ensure_listener()
        event = asyncio.Event()
        watchers = self._watchers.setdefault((workflow, run_id), set())
        watchers.add(event)
        try:
            await asyncio.wait_for(event.wait(), timeout)
            return True
        except TimeoutError:
            return False
        finally:
            watchers.discard(event)
            if not watchers:
                self._watchers.pop((workflow, run_id), None)

    def _ensure_listener(self) -> None:
        if time.monotonic() < self._listen_again_at:
            return  # it failed a moment ago: poll only, do not hammer a ledger that is down
        if self._listener is None or self._listener.done():
            self._listen_again_at = time.monotonic() + LISTEN_RETRY_SECONDS
            self._listener = asyncio.get_running_loop().create_task(
                self._listen(), name="conveyor-review-listener"
            )

    async def _listen(self) -> None:
        from conveyor.ledger.store import Ledger

        try:
            conn = await psycopg.AsyncConnection.connect(
                self.dsn, autocommit=True, application_name="conveyor-review-listener", connect_timeout=10
            )
        except Exception as exc:
            log.warning("cannot listen for review decisions (polling only until the next try): %s", exc)
            return
        try:
            await conn.execute(f"LISTEN {Ledger.REVIEW_CHANNEL}")
            async for note in conn.notifies():
                self.notifications += 1
                workflow, _, run_id = note.payload.partition("\x1f")
                for event in self._watchers.get((workflow, run_id), ()):
                    event.set()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the next wait starts a new listener
            log.warning("listening for review decisions failed (polling only until the next try): %s", exc)
        finally:
            try:
                await conn.close()
            except Exception:
                log.debug("closing the listener connection failed", exc_info=True)

    async def pending(self, workflow: str, run_id: str, step: str | None = None) -> PendingCount:
        """How many items of ``(workflow, run_id)`` wait for a person now, or were corrected and wait
        to be validated again (``.corrected`` of them); with ``step``, also since when the oldest
        item that step has not escalated waits (``.oldest``).

        :raises psycopg.Error: the ledger could not be asked (the caller retries on its next tick).
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[PendingCount] = loop.create_future()
        self._waiting.setdefault((workflow, run_id, step or ""), []).append(future)
        if self._flush is None:
            self._flush = loop.create_task(self._send_batch(), name="conveyor-review-pending-batch")
        return await future

    async def _send_batch(self) -> None:
        await asyncio.sleep(self.batch_window)
        batch, self._waiting, self._flush = self._waiting, {}, None
        batch = {key: [f for f in futures if not f.done()] for key, futures in batch.items()}
        batch = {key: futures for key, futures in batch.items() if futures}
        if not batch:
            return
        try:
            counts = await self._query(list(batch))
        except Exception as exc:
            log.warning("review poll of %d run(s) failed: %s", len(batch), exc)
            await self._drop_connection()
            for futures in batch.values():
                for future in futures:
                    if not future.done():
                        future.set_exception(exc)
            return
        for key, futures in batch.items():
            for future in futures:
                if not future.done():
                    future.set_result(counts.get(key, PendingCount()))

    async def _query(self, keys: list[Key]) -> dict[Key, PendingCount]:
        async with self._lock:
            if self._conn is None or self._conn.closed:
                self._conn = await psycopg.AsyncConnection.connect(
                    self.dsn, autocommit=True, application_name="conveyor-review-trigger", connect_timeout=10
                )
            self.queries += 1
            PendingCounter.total_queries += 1
            rows = await run_waits.pending_batch(
                self._conn, keys, statuses=_UNRESOLVED_VALUES, corrected=Status.CORRECTED
            )
        return {
            (row.workflow, row.run_id, row.step): PendingCount(row.waiting - row.corrected, row.corrected, row.oldest)
            for row in rows
        }

    async def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None and not conn.closed:
            try:
                await conn.close()
            except Exception:  # a broken connection may fail to close; it is gone either way
                log.debug("closing a broken ledger connection failed", exc_info=True)

    async def close(self) -> None:
        """Close the shared connections (they reopen on the next question)."""
        listener, self._listener = self._listener, None
        if listener is not None and not listener.done():
            listener.cancel()
            try:
                await listener
            except (asyncio.CancelledError, Exception):
                pass
        async with self._lock:
            await self._drop_connection()


# event loop -> DSN -> counter; a closed loop drops its counters with it.
_COUNTERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, PendingCounter]] = (
    weakref.WeakKeyDictionary()
)


@asynccontextmanager
async def shared_counter(dsn: str) -> AsyncIterator[PendingCounter]:
    """The counter every trigger of this event loop shares for ``dsn``; closed when the last leaves."""
    loop = asyncio.get_running_loop()
    counters = _COUNTERS.setdefault(loop, {})
    counter = counters.get(dsn)
    if counter is None:
        counter = counters[dsn] = PendingCounter(dsn)
    counter.users += 1
    try:
        yield counter
    finally:
        counter.users -= 1
        if counter.users == 0:
            counters.pop(dsn, None)
            await asyncio.shield(counter.close())


def counters_of_this_loop() -> dict[str, PendingCounter]:
    """The counters alive in the running event loop (for tests and the benchmark)."""
    return dict(_COUNTERS.get(asyncio.get_running_loop(), {}))
