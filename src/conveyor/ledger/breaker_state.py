"""The circuit breakers' shared state: the ``conveyor.ai_breakers`` rows, one per model endpoint.

What the states mean and when a breaker opens, probes or closes is
:class:`conveyor.ai.breaker.CircuitBreaker`'s; this module owns the statements. Each transition
is one guarded ``UPDATE ... RETURNING``, so two workers can never both win a probe or both
re-open the breaker; a guard that does not hold returns None. The functions take the breaker's
own (autocommit) connection.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

_COLUMNS = "state, failures, opened_at, probe_owner, probe_started_at, last_error, now()"


@dataclass(frozen=True)
class BreakerState:
    """One reading of an endpoint's breaker.

    :param state: ``closed``, ``open`` or ``half_open``.
    :param failures: consecutive failed calls.
    :param now: the database's clock at the reading (the cool-downs are measured on it).
    """

    state: str
    failures: int
    opened_at: datetime | None
    probe_owner: str | None
    probe_started_at: datetime | None
    last_error: str | None
    now: datetime

    @classmethod
    def from_row(cls, row: tuple[Any, ...]) -> BreakerState:
        return cls(*row)


def _state(cur: psycopg.Cursor[Any]) -> BreakerState | None:
    row = cur.fetchone()
    return BreakerState.from_row(row) if row else None


def ensure(conn: psycopg.Connection, endpoint: str) -> None:
    """Create the endpoint's row (closed, no failures) unless it is there."""
    conn.execute(
        "INSERT INTO conveyor.ai_breakers (endpoint) VALUES (%s) ON CONFLICT DO NOTHING",
        (endpoint,),
    )


def read(conn: psycopg.Connection, endpoint: str) -> BreakerState | None:
    """The endpoint's state (None before :func:`ensure`)."""
    return _state(
        conn.execute(
            f"SELECT {_COLUMNS} FROM conveyor.ai_breakers WHERE endpoint = %(endpoint)s",
            {"endpoint": endpoint},
        )
    )


def try_probe(
    conn: psycopg.Connection, endpoint: str, *, me: str, cooldown: float, stale: float
) -> BreakerState | None:
    """Win the probe of an open breaker whose cool-down is over (or of a probe silent for
    ``stale`` seconds); None when somebody else won it or it is not due.

    :param me: the probing worker's name.
    :param cooldown: seconds a breaker stays open.
    :param stale: seconds after which a silent probe is taken over.
    """
    return _state(
        conn.execute(
            f"""
            UPDATE conveyor.ai_breakers SET state = 'half_open', probe_owner = %(me)s,
                   probe_started_at = now(), updated_at = now()
            WHERE endpoint = %(endpoint)s AND (
                (state = 'open' AND opened_at <= now() - make_interval(secs => %(cooldown)s))
                OR (state = 'half_open' AND probe_started_at <= now() - make_interval(secs => %(stale)s)))
            RETURNING {_COLUMNS}
            """,
            {"endpoint": endpoint, "me": me, "cooldown": cooldown, "stale": stale},
        )
    )


def fail(conn: psycopg.Connection, endpoint: str, *, threshold: int, error: str) -> BreakerState | None:
    """Count a failed call: ``threshold`` consecutive ones (or a failed probe) open the breaker.

    :param error: what failed (stored as the breaker's last error).
    """
    return _state(
        conn.execute(
            f"""
            UPDATE conveyor.ai_breakers SET
                failures = failures + 1,
                state = CASE WHEN state = 'half_open' OR (state = 'closed' AND failures + 1 >= %(threshold)s)
                             THEN 'open' ELSE state END,
                opened_at = CASE WHEN state = 'half_open'
                                   OR (state = 'closed' AND failures + 1 >= %(threshold)s)
                                 THEN now() ELSE opened_at END,
                probe_owner = CASE WHEN state = 'half_open' THEN NULL ELSE probe_owner END,
                last_error = %(error)s, updated_at = now()
            WHERE endpoint = %(endpoint)s
            RETURNING {_COLUMNS}
            """,
            {"endpoint": endpoint, "threshold": threshold, "error": error},
        )
    )


def succeed(conn: psycopg.Connection, endpoint: str, *, me: str) -> BreakerState | None:
    """Count an answered call: reset the failures, close after ``me``'s probe; None when there
    was nothing to change (closed with no failures, or somebody else's probe)."""
    return _state(
        conn.execute(
            f"""
            UPDATE conveyor.ai_breakers SET
                failures = 0,
                state = CASE WHEN state = 'half_open' THEN 'closed' ELSE state END,
                opened_at = CASE WHEN state = 'half_open' THEN NULL ELSE opened_at END,
                probe_owner = NULL, probe_started_at = NULL, updated_at = now()
            WHERE endpoint = %(endpoint)s AND (
                (state = 'half_open' AND probe_owner = %(me)s) OR (state = 'closed' AND failures > 0))
            RETURNING {_COLUMNS}
            """,
            {"endpoint": endpoint, "me": me},
        )
    )


__all__ = ["BreakerState", "ensure", "fail", "read", "succeed", "try_probe"]
