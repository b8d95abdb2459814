"""The fast read path behind ``conveyor status`` and ``conveyor history``.

"Where is this item right now" must answer in well under half a second, process start
included. psycopg 3 costs ~0.5 s to import here, psycopg2 (a C extension that Airflow's
postgres provider installs anyway) ~0.15 s, so these two primary-key reads use psycopg2.
Everything that writes goes through :class:`conveyor.ledger.store.Ledger`.
"""

from __future__ import annotations

from conveyor.ledger.connection import describe, resolve_dsn
from conveyor.ledger.errors import LedgerUnavailable, UnknownItem
from conveyor.ledger.records import ITEM_COLUMNS, TRANSITION_COLUMNS, Item, TransitionRecord


def _connect(dsn: str):  # type: ignore[no-untyped-def]
    import psycopg2

    try:
        return psycopg2.connect(dsn, connect_timeout=10, application_name="conveyor-cli")
    except psycopg2.OperationalError as exc:
        first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise LedgerUnavailable(f"cannot reach the ledger database at {describe(dsn)}: {first_line}") from None


def get_item(item_id: str, dsn: str | None = None) -> Item:
    """One item by id; raises :class:`UnknownItem`."""
    conn = _connect(resolve_dsn(dsn))
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT {ITEM_COLUMNS} FROM conveyor.items WHERE item_id = %s", (item_id,))
            row = cur.fetchone()
    finally:
        conn.close()
    if row is None:
        raise UnknownItem(item_id)
    return Item(*row)


def get_history(item_id: str, dsn: str | None = None) -> list[TransitionRecord]:
    """Every transition of an item, oldest first; raises :class:`UnknownItem`."""
    conn = _connect(resolve_dsn(dsn))
    try:
        with conn.cursor() as cur:
            cur.execute(
                f"SELECT {TRANSITION_COLUMNS} FROM conveyor.transitions WHERE item_id = %s ORDER BY id",
                (item_id,),
            )
            rows = cur.fetchall()
            if not rows:
                cur.execute("SELECT 1 FROM conveyor.items WHERE item_id = %s", (item_id,))
                if cur.fetchone() is None:
                    raise UnknownItem(item_id)
    finally:
        conn.close()
    return [TransitionRecord(*row) for row in rows]
