"""A process's idle connections to the ledger, handed out again instead of opened anew.

Opening a PostgreSQL connection costs a server process and four round trips (startup, SCRAM's
two, the parameters); a reviewer's decision, a sensor's poke or a step's chunk used to pay that
for each of its few statements. :func:`checkout` hands back an idle connection of the same
process, DSN and application name after one empty query proves the server still has it (a
restarted or crashed ledger leaves dead sockets behind: those are dropped, and a new connection
is opened, riding out the restart as before). :func:`checkin` keeps a connection that ended its
transaction cleanly; anything else is closed.

Safe across forks: Airflow's task runner and Celery fork their workers. A child must never speak
on its parent's sessions, nor end them. psycopg already leaves a connection collected after a
fork alone, but a child that commits or closes one it inherited (a block open across the fork)
would send that on the parent's socket: so after a fork every connection the parent made is
pointed at ``/dev/null`` in the child and forgotten there; the child opens its own.

Bounded, so that many processes do not hold the server's slots (``max_connections``) while they
do nothing: ``[conveyor] ledger_pool_size`` idle connections per DSN (1 by default: one
connection per process, fewer than Airflow's own metadata pool keeps; 0: none, every ``connect``
opens and closes its own connection), at most :data:`MAX_IDLE` in all across DSNs (the least
recently used goes first), and none idle longer than ``[conveyor] ledger_pool_idle_seconds``: a
daemon timer closes those, so a process gone quiet gives its slot back.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import psycopg

_Key = tuple[str, str]

#: Idle connections one process keeps in all, whatever the DSNs (a test process meets many).
MAX_IDLE = 4

_lock = threading.Lock()
#: (dsn, application name) -> (idle connection, when it came back), the most recently used last
_idle: dict[_Key, list[tuple[psycopg.Connection, float]]] = {}
#: every connection this process made, so a forked child can neuter them all
_made: weakref.WeakSet[psycopg.Connection] = weakref.WeakSet()
_pid = os.getpid()
#: the timer that closes what stayed idle too long (None: none scheduled)
_reaper: threading.Timer | None = None


def size() -> int:
    """Idle connections kept per DSN (``[conveyor] ledger_pool_size``)."""
    from conveyor import config

    return max(0, config.get_int("ledger_pool_size"))


def idle_seconds() -> float:
    """How long a connection may stay idle before it is closed (``[conveyor] ledger_pool_idle_seconds``)."""
    from conveyor import config

    return max(1.0, float(config.get_int("ledger_pool_idle_seconds")))


def checkout(dsn: str, application_name: str, open_new: Callable[[], psycopg.Connection]) -> psycopg.Connection:
    """An idle connection of this process that answers, else a new one from ``open_new``."""
    key = (dsn, application_name)
    kept_for = idle_seconds()
    while True:
        with _lock:
            _forget_if_forked()
            stale = _take_stale(time.monotonic() - kept_for)
            idle = _idle.get(key)
            conn = idle.pop()[0] if idle else None
        _close(stale)
        if conn is None:
            conn = open_new()
            _made.add(conn)
            return conn
        if _answers(conn):
            return conn
        conn.close()
        # The server lost this one, so it lost its idle siblings too (a restart): drop them at once
        # rather than pinging each in turn.
        with _lock:
            lost = [other for other, _ in _idle.pop(key, [])]
        _close(lost)


def checkin(dsn: str, application_name: str, conn: psycopg.Connection) -> None:
    """Keep ``conn`` for the next :func:`checkout` if it is clean and there is room; else close it."""
    import psycopg

    clean = (
        not conn.closed
        and not conn.broken
        and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    )
    if clean and conn.autocommit:  # a migration ran in autocommit: the next user expects transactions
        conn.autocommit = False
    key = (dsn, application_name)
    room, kept_for = size(), idle_seconds()
    with _lock:
        _forget_if_forked()
        if clean and conn in _made and len(_idle.get(key, [])) < room:
            _idle.setdefault(key, []).append((conn, time.monotonic()))
            closing = _take_stale(time.monotonic() - kept_for) + _take_over_bound()
            _schedule_reaper(kept_for)
        else:
            closing = [conn]
    _close(closing)


def clear() -> None:
    """Close every idle connection of this process (tests, and a process about to exit)."""
    with _lock:
        _forget_if_forked()
        conns = [conn for idle in _idle.values() for conn, _ in idle]
        _idle.clear()
    _close(conns)


def idle_count(dsn: str, application_name: str) -> int:
    """How many idle connections are kept for this DSN and application name."""
    with _lock:
        return len(_idle.get((dsn, application_name), []))


def idle_total() -> int:
    """How many idle connections this process keeps, for every DSN."""
    with _lock:
        return sum(len(idle) for idle in _idle.values())


def _take_stale(before: float) -> list[psycopg.Connection]:
    """(lock held) Take out every idle connection that came back before ``before``."""
    stale = []
    for key, idle in list(_idle.items()):
        keep = [(conn, since) for conn, since in idle if since >= before]
        stale += [conn for conn, since in idle if since < before]
        if keep:
            _idle[key] = keep
        else:
            del _idle[key]
    return stale


def _take_over_bound() -> list[psycopg.Connection]:
    """(lock held) Take out the least recently used idle connections beyond :data:`MAX_IDLE`."""
    entries = sorted(((since, key, conn) for key, idle in _idle.items() for conn, since in idle), key=lambda e: e[0])
    over = entries[: max(0, len(entries) - MAX_IDLE)]
    for _, key, conn in over:
        _idle[key] = [(c, t) for c, t in _idle[key] if c is not conn]
        if not _idle[key]:
            del _idle[key]
    return [conn for _, _, conn in over]


def _schedule_reaper(kept_for: float) -> None:
    """(lock held) A daemon timer to close what stays idle too long, unless one is waiting."""
    global _reaper
    if _reaper is not None or not _idle:
        return
    _reaper = threading.Timer(kept_for, _reap, args=(kept_for,))
    _reaper.daemon = True  # never keeps a process from exiting
    _reaper.start()


def _reap(kept_for: float) -> None:
    global _reaper
    with _lock:
        _reaper = None
        if _pid != os.getpid():
            return
        stale = _take_stale(time.monotonic() - kept_for)
        _schedule_reaper(kept_for)  # for what came back since
    _close(stale)


def _close(conns: list[psycopg.Connection]) -> None:
    for conn in conns:
        conn.close()


def _answers(conn: psycopg.Connection) -> bool:
    """One empty query (no transaction, one round trip): is the server still at the other end?"""
    import psycopg

    if conn.closed or conn.broken:
        return False
    try:
        result = conn.pgconn.exec_(b"")
    except psycopg.Error:  # libpq could not even send it
        return False
    return result.status == psycopg.pq.ExecStatus.EMPTY_QUERY and conn.pgconn.status == psycopg.pq.ConnStatus.OK


def _forget_if_forked() -> None:
    """In a forked child (lock held): drop the parent's connections without touching its sessions."""
    global _pid
    if _pid == os.getpid():
        return
    _pid = os.getpid()
    _neuter(list(_made))
    _idle.clear()
    _made.clear()


def _neuter(conns: list[psycopg.Connection]) -> None:
    devnull = os.open(os.devnull, os.O_RDONLY)
    try:
        for conn in conns:
            try:
                fd = conn.pgconn.socket
            except Exception:  # already closed: nothing shared
                continue
            os.dup2(devnull, fd)  # this process's copy of the socket only; the parent's is untouched
    finally:
        os.close(devnull)


def _after_fork_in_child() -> None:
    # At once, not at the child's first checkout: the child may use an inherited connection
    # directly (a block open across the fork). The parent's lock may have been held by another
    # of its threads at the fork: the child takes a fresh one.
    global _lock, _reaper
    _lock = threading.Lock()
    _reaper = None  # the parent's timer thread does not exist here
    _forget_if_forked()


os.register_at_fork(after_in_child=_after_fork_in_child)
