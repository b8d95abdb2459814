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

``[conveyor] ledger_pool_size`` idle connections are kept per DSN (0: none, every ``connect``
opens and closes its own connection as before the pool).
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import psycopg

_Key = tuple[str, str]

_lock = threading.Lock()
#: (dsn, application name) -> idle connections, the most recently used last
_idle: dict[_Key, list[psycopg.Connection]] = {}
#: every connection this process made, so a forked child can neuter them all
_made: weakref.WeakSet[psycopg.Connection] = weakref.WeakSet()
_pid = os.getpid()


def size() -> int:
    """Idle connections kept per DSN (``[conveyor] ledger_pool_size``)."""
    from conveyor import config

    return max(0, config.get_int("ledger_pool_size"))


def checkout(dsn: str, application_name: str, open_new: Callable[[], psycopg.Connection]) -> psycopg.Connection:
    """An idle connection of this process that answers, else a new one from ``open_new``."""
    key = (dsn, application_name)
    while True:
        with _lock:
            _forget_if_forked()
            idle = _idle.get(key)
            conn = idle.pop() if idle else None
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
            stale = _idle.pop(key, [])
        for other in stale:
            other.close()


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
    with _lock:
        _forget_if_forked()
        idle = _idle.setdefault((dsn, application_name), [])
        if clean and conn in _made and len(idle) < size():
            idle.append(conn)
            return
    conn.close()


def clear() -> None:
    """Close every idle connection of this process (tests, and a process about to exit)."""
    with _lock:
        _forget_if_forked()
        conns = [conn for idle in _idle.values() for conn in idle]
        _idle.clear()
    for conn in conns:
        conn.close()


def idle_count(dsn: str, application_name: str) -> int:
    """How many idle connections are kept for this DSN and application name."""
    with _lock:
        return len(_idle.get((dsn, application_name), []))


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
    global _lock
    _lock = threading.Lock()
    _forget_if_forked()


os.register_at_fork(after_in_child=_after_fork_in_child)
