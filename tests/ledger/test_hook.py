"""LedgerHook: the ledger's Airflow connection type, its Test button, and the ledger it hands out."""

from __future__ import annotations

import pytest

from conveyor.ledger import Ledger, migrate
from conveyor.ledger.hook import LedgerHook
from conveyor.provider import get_provider_info
from conveyor.quickstart.api_server import free_port


def airflow_uri(dsn: str, scheme: str) -> str:
    return dsn.replace("postgresql://", f"{scheme}://", 1)


def test_the_provider_lists_the_ledgers_connection_type_and_airflow_finds_its_hook() -> None:
    from airflow.providers_manager import ProvidersManager

    assert {"connection-type": "conveyor_ledger", "hook-class-name": "conveyor.ledger.hook.LedgerHook"} in (
        get_provider_info()["connection-types"]
    )
    found = {m.connection_type: m.hook_class_name for m in ProvidersManager().iter_connection_type_hook_ui_metadata()}
    assert found["conveyor_ledger"] == "conveyor.ledger.hook.LedgerHook"


@pytest.mark.parametrize("scheme", ["conveyor-ledger", "postgres"])
def test_a_connection_of_either_type_gives_the_ledger_and_the_test_button_names_its_version(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch, scheme: str
) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_MY_LEDGER", airflow_uri(ledger.dsn, scheme))
    hook = LedgerHook("my_ledger", application_name="conveyor-test")
    mine = hook.get_ledger()
    assert mine.dsn.split("?")[0] == ledger.dsn.split("?")[0]
    assert mine.application_name == "conveyor-test"
    newest = max(m.version for m in migrate.available_migrations())
    assert mine.schema_version() == newest
    ok, message = hook.test_connection()
    assert ok and f"ledger schema version {newest}" in message, message
    with hook.get_conn() as conn:  # a connection of the caller's own
        assert conn.execute("SELECT current_setting('application_name')").fetchone() == ("conveyor-test",)


def test_the_test_button_says_what_is_wrong_and_what_to_do(fresh_db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_EMPTY_LEDGER", airflow_uri(fresh_db, "conveyor-ledger"))
    ok, message = LedgerHook("empty_ledger").test_connection()
    assert ok and "no Conveyor tables yet: run `conveyor db upgrade`" in message, message

    port = free_port()
    monkeypatch.setenv("AIRFLOW_CONN_AWAY_LEDGER", f"conveyor-ledger://postgres@127.0.0.1:{port}/conveyor")
    ok, message = LedgerHook("away_ledger", reconnect_seconds=0).test_connection()
    assert not ok and f"host=127.0.0.1 port={port} dbname=conveyor" in message, message


def test_the_hook_upgrades_a_new_ledger(fresh_db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_NEW_LEDGER", airflow_uri(fresh_db, "conveyor-ledger"))
    hook = LedgerHook("new_ledger")
    applied = hook.upgrade()
    assert applied and hook.get_ledger().schema_version() == max(m.version for m in migrate.available_migrations())
    assert hook.upgrade() == []
