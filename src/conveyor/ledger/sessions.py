"""A ledger connection as a block: opened riding out a restart, taken from and given back to the
process's idle ones (:mod:`conveyor.ledger.pool`), committed or rolled back, and a connection lost
inside it reported as :class:`~conveyor.ledger.errors.LedgerUnavailable`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from conveyor.ledger import faults, pool
from conveyor.ledger.connection import describe
from conveyor.ledger.errors import LedgerUnavailable

if TYPE_CHECKING:
    import psycopg


def open_connection(dsn: str, application_name: str, reconnect_seconds: float) -> psycopg.Connection:
    """A new connection; while the server refuses (restarting, recovering from a crash) it is
    tried again for up to ``reconnect_seconds``, so a task rides out a short restart."""
    import psycopg

    deadline = time.monotonic() + reconnect_seconds
    delay = 0.25
    while True:
        try:
            return psycopg.connect(dsn, application_name=application_name, connect_timeout=10, autocommit=False)
        except psycopg.OperationalError as exc:
            left = deadline - time.monotonic()
            if left <= 0:
                raise LedgerUnavailable(
                    f"cannot reach the ledger database at {describe(dsn)}: {faults.first_line(exc)}"
                ) from None
            time.sleep(min(delay, left))
            delay = min(delay * 2, 2.0)


@contextmanager
def session(dsn: str, application_name: str, reconnect_seconds: float) -> Iterator[psycopg.Connection]:
    """A connection for one block: commits on success, rolls back on error (see :meth:`Ledger.connect`)."""
    import psycopg

    conn = pool.checkout(dsn, application_name, lambda: open_connection(dsn, application_name, reconnect_seconds))
    try:
        try:
            yield conn
        except BaseException:
            if not conn.closed and not conn.broken:
                conn.rollback()  # what ``with conn:`` did, but the connection stays open
            raise
        conn.commit()
    except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
        conn.close()
        raise LedgerUnavailable(f"lost the ledger database at {describe(dsn)}: {faults.first_line(exc)}") from exc
    finally:
        pool.checkin(dsn, application_name, conn)
