"""Connections, variables and pools as stored in the test session's Airflow metadata DB."""

from __future__ import annotations

from typing import Any

SHIPPED_CONNECTIONS = {"conveyor_ledger", "conveyor_llm", "conveyor_smtp", "conveyor_alert_webhook"}
SHIPPED_VARIABLES = {
    "conveyor_invoice_approval_threshold",
    "conveyor_alert_email",
    "conveyor_supplier_extract",
    "conveyor_invoice_inbox",
    "conveyor_inspection_notes",
}
SHIPPED_POOLS = {"conveyor_llm"}


def delete_test_items() -> None:
    from airflow.models import Connection, Pool, Variable
    from airflow.utils.session import create_session
    from sqlalchemy import delete, or_

    with create_session() as session:
        session.execute(
            delete(Connection).where(
                or_(Connection.conn_id.in_(SHIPPED_CONNECTIONS), Connection.conn_id.like("deploytest_%"))
            )
        )
        session.execute(
            delete(Variable).where(
                or_(Variable.key.in_(SHIPPED_VARIABLES), Variable.key.like("deploytest_%"))
            )
        )
        session.execute(delete(Pool).where(or_(Pool.pool.in_(SHIPPED_POOLS), Pool.pool.like("deploytest_%"))))


def stored_connection(conn_id: str) -> dict[str, Any] | None:
    """The connection as stored in the metadata DB (not the environment), decrypted by Airflow."""
    from airflow.models import Connection
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        conn = session.scalar(select(Connection).where(Connection.conn_id == conn_id))
        if conn is None:
            return None
        return {
            "conn_type": conn.conn_type,
            "host": conn.host,
            "schema": conn.schema,
            "login": conn.login,
            "password": conn.password,
            "port": conn.port,
            "extra": conn.extra_dejson,
            "description": conn.description,
            "_password": conn._password,
        }


def stored_variable(key: str) -> str | None:
    from airflow.models import Variable
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        var = session.scalar(select(Variable).where(Variable.key == key))
        return None if var is None else var.val


def stored_pool(name: str) -> tuple[int, str] | None:
    from airflow.models import Pool

    pool = Pool.get_pool(name)
    return None if pool is None else (pool.slots, pool.description)
