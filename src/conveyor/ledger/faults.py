"""The ledger's own faults: a server restarting, crashing or out of reach is transient.

Conveyor's rule (see the design's recovery paths): a fault of our own infrastructure never marks an
item failed and never counts as a model failure. Inside :meth:`conveyor.ledger.Ledger.connect` a
lost or refused connection becomes :class:`~conveyor.ledger.errors.LedgerUnavailable`; a task
that meets it fails with that error and Airflow retries it (every bundled task has retries), and
the steps whose ledger writes are idempotent (guarded moves, the content-addressed result cache)
first wait for the ledger here, so a restart of a few seconds costs no task try at all.

Nothing here imports the database driver at module level.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import TypeVar

from conveyor.ledger.errors import LedgerUnavailable

log = logging.getLogger(__name__)

_T = TypeVar("_T")

#: Seconds a task waits for its ledger to come back before it gives up and lets Airflow retry it:
#: a restart takes 1-2 s, crash recovery a few seconds more; beyond this a person should look.
DEFAULT_PATIENCE = 120.0


def is_unavailable(exc: BaseException) -> bool:
    """True for an error that says the ledger's server is away, not that a statement was wrong.

    psycopg's ``OperationalError`` covers a lost connection, a server shutting down or starting up
    (``57P01``, ``57P03``), a crash (``57P02``) and resource exhaustion; ``InterfaceError`` a
    connection already closed under us. Data errors (``DataError``, ``IntegrityError``...) are not.
    """
    if isinstance(exc, LedgerUnavailable):
        return True
    import psycopg

    return isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError)


def first_line(exc: BaseException) -> str:
    """The first line of a driver error, for a one-line message."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def patiently(
    fn: Callable[[], _T],
    *,
    what: str,
    patience: float = DEFAULT_PATIENCE,
    sleep: Callable[[float], None] = time.sleep,
) -> _T:
    """Call ``fn`` until it gets past the ledger being away, for at most ``patience`` seconds.

    Only for idempotent work: a guarded move or an upsert may have committed just before the
    connection was lost, so running it again must change nothing the first run did.

    :param fn: the ledger work (it opens its own connection).
    :param what: what the work is, for the log ("committing chunk 3").
    :param patience: seconds to keep trying; then the last :class:`LedgerUnavailable` is raised.
    :param sleep: how to wait (a test may pass a recorder).
    """
    deadline = time.monotonic() + patience
    delay = 0.5
    while True:
        try:
            return fn()
        except Exception as exc:
            if not is_unavailable(exc):
                raise
            left = deadline - time.monotonic()
            if left <= 0:
                if isinstance(exc, LedgerUnavailable):
                    raise
                raise LedgerUnavailable(f"the ledger stayed unreachable while {what}: {first_line(exc)}") from exc
            wait = min(delay, left) * random.uniform(0.8, 1.0)
            log.warning("The ledger is unreachable while %s (%s); trying again in %.1f s.", what, first_line(exc), wait)
            sleep(wait)
            delay = min(delay * 2, 5.0)
