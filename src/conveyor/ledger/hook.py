"""The ledger as an Airflow hook: its connection type, its form, its test button, its migrations.

:class:`LedgerHook` is how Airflow code reaches the ledger: the operators (through
:func:`conveyor.ledger_step.open_ledger`), the review sensor and the API server take their
:class:`~conveyor.ledger.store.Ledger` from it. It resolves the connection the same way the CLI
does (:func:`conveyor.ledger.connection.resolve_dsn`: the environment's fast paths first, then
Airflow's secrets backends), and the ledger it returns shares its process's pooled connections
(:mod:`conveyor.ledger.pool`). The provider info lists it for the ``conveyor_ledger`` connection
type; a ``postgres`` connection works as well, as it always did.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseHook

if TYPE_CHECKING:
    import psycopg

    from conveyor.ledger.store import Ledger


class LedgerHook(BaseHook):
    """The item ledger's PostgreSQL database.

    :param ledger_conn_id: the Airflow connection (default ``[conveyor] ledger_conn_id``, itself
        ``conveyor_ledger`` by default): type ``conveyor_ledger`` or ``postgres``.
    :param application_name: shown in ``pg_stat_activity`` for this hook's connections.
    :param reconnect_seconds: how long a connection attempt keeps trying while the server refuses
        (a restart, crash recovery); None reads ``[conveyor] ledger_reconnect_seconds``.
    """

    conn_name_attr = "ledger_conn_id"
    default_conn_name = "conveyor_ledger"
    conn_type = "conveyor_ledger"
    hook_name = "Conveyor ledger (PostgreSQL)"

    def __init__(
        self,
        ledger_conn_id: str | None = None,
        *,
        application_name: str = "conveyor",
        reconnect_seconds: float | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        from conveyor import config

        self.ledger_conn_id = ledger_conn_id or config.ledger_conn_id()
        self.application_name = application_name
        self.reconnect_seconds = (
            float(config.get_int("ledger_reconnect_seconds")) if reconnect_seconds is None else reconnect_seconds
        )

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        """The connection form: a PostgreSQL server, its database named as such."""
        return {
            "hidden_fields": ["extra"],
            "relabeling": {"schema": "Database", "login": "User"},
            "placeholders": {"host": "127.0.0.1", "schema": "conveyor", "port": "5432", "login": "postgres"},
        }

    def get_ledger(self) -> Ledger:
        """The ledger behind the connection (its connections pooled per process)."""
        from conveyor.ledger.store import Ledger

        return Ledger(
            conn_id=self.ledger_conn_id,
            application_name=self.application_name,
            reconnect_seconds=self.reconnect_seconds,
        )

    def get_conn(self) -> psycopg.Connection:
        """A new connection of the caller's own (not pooled); the caller closes it."""
        return self.get_ledger().open_connection()

    def test_connection(self) -> tuple[bool, str]:
        """What the connection form's Test button shows: the server answers, the schema's version."""
        from conveyor.ledger.errors import LedgerError

        ledger = None
        try:
            ledger = self.get_ledger()
            version = ledger.schema_version()
        except LedgerError as exc:
            return False, str(exc)
        if version == 0:
            return True, f"reached {ledger!r}; no Conveyor tables yet: run `conveyor db upgrade`"
        return True, f"reached {ledger!r} at ledger schema version {version}"

    def upgrade(self, target: int | None = None) -> list[str]:
        """Apply the ledger's pending migrations; returns the names applied."""
        return self.get_ledger().upgrade(target)
