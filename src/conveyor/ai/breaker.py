"""The circuit breaker of a model endpoint, its state in the ledger DB so every worker shares it.

States (table ``conveyor.ai_breakers``, one row per endpoint):

* ``closed``: calls go through; each failed call (429, 5xx, timeout, connection error) adds one
  to ``failures``, each answered call resets it to 0.
* ``open``: reached after ``threshold`` consecutive failures. Nobody calls the endpoint until
  ``cooldown`` seconds have passed since it opened; :meth:`CircuitBreaker.acquire` raises
  :class:`BreakerOpen` at once, without touching the network.
* ``half_open``: after the cool-down exactly one worker wins the probe (a guarded ``UPDATE``);
  its call decides: answered -> ``closed``, failed -> ``open`` again with a fresh cool-down. In
  the probing process, the other calls wait for the probe's outcome; in other processes they see
  the breaker as open. A probe that never reports back (its worker was killed) is taken over
  after ``probe_timeout``.

Each transition is a single guarded statement, so two workers can never both win a probe or
both re-open the breaker. Reads are cached for ``poll_interval`` seconds: a healthy endpoint
costs no database round trip per call.

While the ledger itself is away (restarting, crashed), the breaker degrades to this process's own
state (the same transitions, applied in memory) instead of failing the model call: a fault of our
own database is never a model failure. It shares its state again once the ledger answers.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from conveyor.ai.errors import BreakerOpen
from conveyor.ledger import breaker_state
from conveyor.ledger.breaker_state import BreakerState as BreakerState
from conveyor.ledger.store import Ledger

log = logging.getLogger(__name__)

def _utcnow() -> datetime:
    return datetime.now(UTC)


def _closed_now() -> BreakerState:
    """The state of a breaker nobody has read yet: closed, no failures."""
    return BreakerState("closed", 0, None, None, None, None, _utcnow())


class CircuitBreaker:
    """The shared breaker of one endpoint.

    :param ledger: the ledger whose database holds the state.
    :param endpoint: the endpoint key (model and base URL).
    :param threshold: consecutive failures that open it.
    :param cooldown: seconds it stays open before one probe is let through.
    :param poll_interval: seconds a reading is reused before the database is asked again.
    :param probe_timeout: seconds after which a silent probe is taken over by another worker.
    """

    def __init__(
        self,
        ledger: Ledger,
        endpoint: str,
        *,
        threshold: int = 5,
        cooldown: float = 60.0,
        poll_interval: float = 1.0,
        probe_timeout: float = 120.0,
    ) -> None:
        if threshold < 1:
            raise ValueError("breaker threshold must be at least 1")
        self.ledger = ledger
        self.endpoint = endpoint
        self.threshold = threshold
        self.cooldown = cooldown
        self.poll_interval = poll_interval
        self.probe_timeout = probe_timeout
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._conn: psycopg.Connection | None = None
        self._cached: tuple[BreakerState, float] | None = None
        self._probe: asyncio.Event | None = None
        self._db_lock = asyncio.Lock()
        #: while set: the ledger was unreachable; work on local state until this monotonic time
        self._away_until: float | None = None

    # -- database ----------------------------------------------------------------------------

    def _execute(
        self,
        statement: Callable[[psycopg.Connection], BreakerState | None],
        local: Callable[[BreakerState], BreakerState | None],
    ) -> BreakerState | None:
        """Run one breaker statement (a :mod:`conveyor.ledger.breaker_state` function) on the ledger;
        while the ledger is away, apply ``local`` to this process's own reading instead (see
        :meth:`_degrade`)."""
        if self._away_until is not None and time.monotonic() < self._away_until:
            return self._degrade(local, None)
        for attempt in (1, 2):
            try:
                if self._conn is None or self._conn.closed:
                    self._conn = psycopg.connect(
                        self.ledger.dsn,
                        autocommit=True,
                        application_name="conveyor-breaker",
                        connect_timeout=5,
                    )
                    breaker_state.ensure(self._conn, self.endpoint)
                state = statement(self._conn)
                if self._away_until is not None:
                    log.warning("The ledger is back: breaker %s is shared again.", self.endpoint)
                    self._away_until = None
                if state is not None:
                    self._cached = (state, time.monotonic())
                return state
            except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                self._conn = None
                if attempt == 2:
                    return self._degrade(local, exc)
        return None

    def _degrade(
        self, local: Callable[[BreakerState], BreakerState | None], exc: BaseException | None
    ) -> BreakerState | None:
        """The ledger is away (restarting, crashed): the breaker keeps working on this process's own
        state, so a model call is never failed for a fault of our own database. The ledger is asked
        again after ``poll_interval`` (at least 2 s, so calls do not queue behind connect attempts)."""
        if exc is not None:
            if self._away_until is None:
                log.warning(
                    "The ledger is unreachable (%s): breaker %s works on this process's own state until "
                    "it is back.", str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__,
                    self.endpoint,
                )
            self._away_until = time.monotonic() + max(self.poll_interval, 2.0)
        current = self._cached[0] if self._cached else _closed_now()
        current = dataclasses.replace(current, now=_utcnow())
        state = local(current)
        if state is not None:
            self._cached = (state, time.monotonic())
        return state

    def read(self) -> BreakerState:
        """The current state (from the database; this process's own while the ledger is away)."""
        state = self._execute(lambda conn: breaker_state.read(conn, self.endpoint), lambda s: s)
        assert state is not None
        return state

    def _try_probe(self) -> BreakerState | None:
        """Win the probe of an open breaker whose cool-down is over (or of a stale probe)."""
        return self._execute(
            lambda conn: breaker_state.try_probe(
                conn, self.endpoint, me=self.owner, cooldown=self.cooldown, stale=self.probe_timeout
            ),
            self._local_probe,
        )

    def _fail(self, error: str) -> BreakerState | None:
        return self._execute(
            lambda conn: breaker_state.fail(conn, self.endpoint, threshold=self.threshold, error=error[:500]),
            lambda s: self._local_fail(s, error[:500]),
        )

    def _succeed(self) -> BreakerState | None:
        return self._execute(
            lambda conn: breaker_state.succeed(conn, self.endpoint, me=self.owner), self._local_succeed
        )

    # -- the same transitions on this process's own state (the ledger away) ------------------

    def _local_probe(self, s: BreakerState) -> BreakerState | None:
        due = (
            s.state == "open" and s.opened_at is not None and s.now >= s.opened_at + timedelta(seconds=self.cooldown)
        ) or (
            s.state == "half_open"
            and s.probe_started_at is not None
            and s.now >= s.probe_started_at + timedelta(seconds=self.probe_timeout)
        )
        if not due:
            return None
        return dataclasses.replace(s, state="half_open", probe_owner=self.owner, probe_started_at=s.now)

    def _local_fail(self, s: BreakerState, error: str) -> BreakerState:
        opens = s.state == "half_open" or (s.state == "closed" and s.failures + 1 >= self.threshold)
        return dataclasses.replace(
            s,
            failures=s.failures + 1,
            state="open" if opens else s.state,
            opened_at=s.now if opens else s.opened_at,
            probe_owner=None if s.state == "half_open" else s.probe_owner,
            last_error=error,
        )

    def _local_succeed(self, s: BreakerState) -> BreakerState | None:
        if not ((s.state == "half_open" and s.probe_owner == self.owner) or (s.state == "closed" and s.failures > 0)):
            return None
        return dataclasses.replace(
            s,
            failures=0,
            state="closed" if s.state == "half_open" else s.state,
            opened_at=None if s.state == "half_open" else s.opened_at,
            probe_owner=None,
            probe_started_at=None,
        )

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    async def _run(self, fn: Any, *args: Any) -> Any:
        async with self._db_lock:
            return await asyncio.to_thread(fn, *args)

    def _fresh(self) -> BreakerState | None:
        if self._cached is not None and time.monotonic() - self._cached[1] < self.poll_interval:
            return self._cached[0]
        return None

    async def _view(self) -> BreakerState:
        cached = self._fresh()
        if cached is not None:
            return cached
        async with self._db_lock:
            # Single flight: the calls that queued behind one refresh use its reading.
            cached = self._fresh()
            if cached is not None:
                return cached
            return await asyncio.to_thread(self.read)

    def _open_error(self, state: BreakerState) -> BreakerOpen:
        retry_at = None
        if state.state == "open" and state.opened_at is not None:
            retry_at = state.opened_at + timedelta(seconds=self.cooldown)
        elif state.state == "half_open" and state.probe_started_at is not None:
            retry_at = state.probe_started_at + timedelta(seconds=self.probe_timeout)
        return BreakerOpen(
            self.endpoint,
            failures=state.failures,
            opened_at=state.opened_at,
            retry_at=retry_at,
            last_error=state.last_error,
        )

    # -- the call protocol -------------------------------------------------------------------

    async def acquire(self) -> None:
        """Return when a call may go out; raise :class:`BreakerOpen` when it may not."""
        while True:
            if self._probe is not None:
                # This process holds the probe: wait for its outcome, then look again.
                await self._probe.wait()
                self._cached = None
                continue
            state = await self._view()
            if state.state == "closed":
                return
            due = (
                state.state == "open"
                and state.opened_at is not None
                and state.now >= state.opened_at + timedelta(seconds=self.cooldown)
            ) or (
                state.state == "half_open"
                and state.probe_started_at is not None
                and state.now >= state.probe_started_at + timedelta(seconds=self.probe_timeout)
            )
            if not due:
                raise self._open_error(state)
            won = await self._run(self._try_probe)
            if won is not None:
                self._probe = asyncio.Event()
                return
            self._cached = None  # somebody else won; read again

    async def record_success(self) -> None:
        """The endpoint answered (whatever the answer): reset the count, close after a probe."""
        probing = self._probe is not None
        cached = self._cached[0] if self._cached else None
        if probing or cached is None or cached.failures > 0 or cached.state != "closed":
            await self._run(self._succeed)
        if probing:
            self._finish_probe()

    async def record_failure(self, error: str) -> None:
        """A call failed transiently: count it; the threshold (or a failed probe) opens the breaker."""
        await self._run(self._fail, error)
        if self._probe is not None:
            self._finish_probe()

    def abandon(self) -> None:
        """A call that had acquired ended without an outcome (cancelled): stop waiting on it here.

        If it held the probe, the row stays ``half_open`` under this worker's name and another
        worker takes the probe over after ``probe_timeout``.
        """
        if self._probe is not None:
            self._finish_probe()

    def _finish_probe(self) -> None:
        event, self._probe = self._probe, None
        self._cached = None
        if event is not None:
            event.set()
