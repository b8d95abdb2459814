"""Loading airflow_settings.yaml into a real, migrated Airflow metadata DB, read back through Airflow."""

from __future__ import annotations

from pathlib import Path

import pytest

from conveyor.deploy.settings import load_airflow_settings, main
from conveyor.deploy.settings_file import SettingsFileError
from tests.deploy.airflow_items import (
    SHIPPED_CONNECTIONS,
    SHIPPED_VARIABLES,
    stored_connection,
    stored_pool,
    stored_variable,
)
from tests.deploy.conftest import REPO, SETTINGS_FILE


def test_shipped_file_loads_and_reads_back_through_airflow(metadata, monkeypatch):
    monkeypatch.setenv("CONVEYOR_LLM_API_KEY", "sk-from-env")

    summary = load_airflow_settings(SETTINGS_FILE)

    assert sorted(summary.connections.created) == sorted(SHIPPED_CONNECTIONS)
    assert sorted(summary.variables.created) == sorted(SHIPPED_VARIABLES)
    assert summary.pools.created == ["conveyor_llm"]
    ledger = stored_connection("conveyor_ledger")
    assert ledger is not None
    assert {k: ledger[k] for k in ("conn_type", "host", "schema", "login", "port")} == {
        "conn_type": "postgres",
        "host": "127.0.0.1",
        "schema": "conveyor",
        "login": "postgres",
        "port": 5432,
    }
    llm = stored_connection("conveyor_llm")
    assert llm is not None
    assert (llm["conn_type"], llm["password"], llm["extra"]) == (
        "pydanticai",
        "sk-from-env",
        {"model": "openai-chat:gpt-4o-mini"},
    )
    # Read the way a hook would: Airflow's own lookup finds what the file stored.
    from airflow.models import Connection, Variable

    smtp = Connection.get_connection_from_secrets("conveyor_smtp")
    assert (smtp.host, smtp.port, smtp.extra_dejson["from_email"]) == (
        "localhost",
        25,
        "conveyor@example.com",
    )
    assert Variable.get("conveyor_invoice_approval_threshold") == "5000"
    assert Variable.get("conveyor_alert_email") == "ops@example.com"
    assert stored_pool("conveyor_llm") == (
        4,
        "Tasks that call a remote model; bounds concurrent LLM calls across workers.",
    )


def test_unknown_conn_type_and_shadowing_environment_are_reported(metadata):
    # The test environment sets AIRFLOW_CONN_CONVEYOR_LEDGER (conftest); no http provider is installed here.
    summary = load_airflow_settings(SETTINGS_FILE)

    assert any(
        "'conveyor_alert_webhook' has conn_type 'http'" in warning for warning in summary.warnings
    ) == (not _provider_installed("http"))
    assert any("'conveyor_ledger' is shadowed by AIRFLOW_CONN_CONVEYOR_LEDGER" in w for w in summary.warnings)
    assert not any("conveyor_smtp" in warning or "conveyor_llm" in warning for warning in summary.warnings)
    assert stored_connection("conveyor_alert_webhook") is not None  # stored anyway


def _provider_installed(conn_type: str) -> bool:
    from airflow.providers_manager import ProvidersManager

    return any(
        m.connection_type == conn_type for m in ProvidersManager().iter_connection_type_hook_ui_metadata()
    )


def test_loading_twice_changes_nothing(metadata):
    load_airflow_settings(SETTINGS_FILE)
    before = {cid: stored_connection(cid) for cid in SHIPPED_CONNECTIONS}

    again = load_airflow_settings(SETTINGS_FILE)

    assert not again.changed
    assert sorted(again.connections.unchanged) == sorted(SHIPPED_CONNECTIONS)
    assert sorted(again.variables.unchanged) == sorted(SHIPPED_VARIABLES)
    assert again.pools.unchanged == ["conveyor_llm"]
    # Not even re-encrypted: the stored ciphertext is the same.
    assert {cid: stored_connection(cid) for cid in SHIPPED_CONNECTIONS} == before
    assert "connections 4 (4 unchanged)" in again.line()


def test_an_edited_value_is_updated_and_nothing_else(metadata, monkeypatch, tmp_path):
    load_airflow_settings(SETTINGS_FILE)
    edited = tmp_path / "airflow_settings.yaml"
    edited.write_text(
        SETTINGS_FILE.read_text()
        .replace("pool_slot: 4", "pool_slot: 8")
        .replace("${CONVEYOR_INVOICE_APPROVAL_THRESHOLD:-5000}", "7500")
        .replace("model: ${CONVEYOR_LLM_MODEL:-openai-chat:gpt-4o-mini}", "model: openai:gpt-4.1-mini")
    )
    monkeypatch.setenv("CONVEYOR_SMTP_PASSWORD", "mail-secret")

    summary = load_airflow_settings(edited)

    assert sorted(summary.connections.updated) == ["conveyor_llm", "conveyor_smtp"]
    assert summary.variables.updated == ["conveyor_invoice_approval_threshold"]
    assert summary.pools.updated == ["conveyor_llm"]
    assert stored_pool("conveyor_llm")[0] == 8
    assert stored_variable("conveyor_invoice_approval_threshold") == "7500"
    assert stored_connection("conveyor_llm")["extra"] == {"model": "openai:gpt-4.1-mini"}
    assert stored_connection("conveyor_smtp")["password"] == "mail-secret"
    # Back to the shipped file: the values return.
    monkeypatch.delenv("CONVEYOR_SMTP_PASSWORD")
    back = load_airflow_settings(SETTINGS_FILE)
    assert sorted(back.connections.updated) == ["conveyor_llm", "conveyor_smtp"]
    assert stored_connection("conveyor_smtp")["password"] is None
    assert stored_pool("conveyor_llm")[0] == 4


def test_a_malformed_file_writes_nothing(metadata, tmp_path):
    path = tmp_path / "airflow_settings.yaml"
    path.write_text(
        "airflow:\n"
        "  connections:\n"
        "    - {conn_id: deploytest_ok, conn_type: postgres, conn_host: db}\n"
        "    - {conn_type: postgres, conn_host: db}\n"
        "  pools:\n"
        "    - {pool_name: deploytest_pool, pool_slot: 2}\n"
    )

    with pytest.raises(SettingsFileError, match=r"connections\[1\]: conn_id is required"):
        load_airflow_settings(path)

    assert stored_connection("deploytest_ok") is None
    assert stored_pool("deploytest_pool") is None


def test_a_connection_id_airflow_refuses_rolls_everything_back(metadata, tmp_path):
    path = tmp_path / "airflow_settings.yaml"
    path.write_text(
        "airflow:\n"
        "  connections:\n"
        "    - {conn_id: deploytest_first, conn_type: http}\n"
        "    - {conn_id: 'deploytest <script>', conn_type: http}\n"
    )

    with pytest.raises(SettingsFileError, match="characters Airflow does not allow"):
        load_airflow_settings(path)

    assert stored_connection("deploytest_first") is None


def test_only_loads_the_chosen_sections(metadata):
    summary = load_airflow_settings(SETTINGS_FILE, only=["pools"])

    assert summary.pools.created == ["conveyor_llm"]
    assert summary.connections.total == summary.variables.total == 0
    assert stored_connection("conveyor_smtp") is None
    assert stored_variable("conveyor_alert_email") is None
    with pytest.raises(ValueError, match="unknown section"):
        load_airflow_settings(SETTINGS_FILE, only=["pool"])


def test_module_main_reports_a_malformed_file_on_stderr(metadata, tmp_path, capsys):
    path = tmp_path / "airflow_settings.yaml"
    path.write_text("airflow:\n  pools:\n    - {pool_name: deploytest_p, pool_slot: many}\n")

    assert main([str(path)]) == 1

    out, err = capsys.readouterr()
    assert out == ""
    assert "pool_slot must be an integer, got 'many'" in err
    assert stored_pool("deploytest_p") is None


def test_repo_has_no_second_settings_file():
    # The native set-up and compose load this one file; a copy elsewhere would drift.
    copies = [
        p
        for p in REPO.rglob("airflow_settings.yaml")
        if ".venv" not in p.parts and ".git" not in p.parts and p != SETTINGS_FILE
    ]
    assert copies == []
    assert isinstance(SETTINGS_FILE, Path) and SETTINGS_FILE.exists()
