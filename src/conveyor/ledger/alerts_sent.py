"""Alerts sent once: the ``conveyor.alerts_sent`` keys (see migration 0015)."""

from __future__ import annotations

import psycopg


def claim(conn: psycopg.Connection, key: str, subject: str, sent_by: str | None) -> bool:
    """Record that ``key`` is being sent; False when somebody recorded it first."""
    row = conn.execute(
        "INSERT INTO conveyor.alerts_sent (alert_key, subject, sent_by) VALUES (%s, %s, %s)"
        " ON CONFLICT (alert_key) DO NOTHING RETURNING alert_key",
        (key, subject[:500], sent_by),
    ).fetchone()
    return row is not None


def release(conn: psycopg.Connection, key: str) -> None:
    """Forget a claim whose sending failed, so another reporter of the same failure may send it."""
    conn.execute("DELETE FROM conveyor.alerts_sent WHERE alert_key = %s", (key,))
