"""Reading airflow_settings.yaml: the shipped file, ${ENV} references and malformed files (no Airflow)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conveyor.deploy.settings_file import SettingsFileError, read_settings_file, resolve_references
from tests.deploy.conftest import SETTINGS_FILE


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "airflow_settings.yaml"
    path.write_text(text)
    return path


def test_shipped_file_declares_the_items_the_dags_use():
    settings = read_settings_file(SETTINGS_FILE, env={})

    conns = {conn.conn_id: conn for conn in settings.connections}
    assert set(conns) == {"conveyor_ledger", "conveyor_llm", "conveyor_smtp", "conveyor_alert_webhook"}
    assert {cid: conn.conn_type for cid, conn in conns.items()} == {
        "conveyor_ledger": "postgres",
        "conveyor_llm": "pydanticai",
        "conveyor_smtp": "smtp",
        "conveyor_alert_webhook": "http",
    }
    assert conns["conveyor_ledger"].schema == "conveyor"
    assert conns["conveyor_llm"].extra == {"model": "openai-chat:gpt-4o-mini"}
    # Shipped without a key: the local model is the default until someone sets one.
    assert conns["conveyor_llm"].password is None
    assert {var.key: var.value for var in settings.variables} == {
        "conveyor_invoice_approval_threshold": "5000",
        "conveyor_alert_email": "ops@example.com",
        "conveyor_supplier_extract": "feeds/supplier_exceptions/extract.csv",
        "conveyor_invoice_inbox": "inbox/invoice_processing",
        "conveyor_inspection_notes": "feeds/inspection_notes.csv",
    }
    assert [(pool.name, pool.slots) for pool in settings.pools] == [("conveyor_llm", 4)]


def test_shipped_file_takes_its_values_from_the_environment():
    env = {
        "CONVEYOR_LEDGER_HOST": "/tmp/pg-socket",
        "CONVEYOR_LEDGER_PORT": "6543",
        "CONVEYOR_LEDGER_PASSWORD": "s3cr$t",
        "CONVEYOR_LLM_API_KEY": "sk-test",
        "CONVEYOR_LLM_MODEL": "openai:gpt-4.1-mini",
        "CONVEYOR_INVOICE_APPROVAL_THRESHOLD": "12000",
        "CONVEYOR_ALERT_EMAIL": "",  # empty: the default applies
        "CONVEYOR_INVOICE_INBOX": "s3://acme-feeds/invoices/inbox",
    }
    settings = read_settings_file(SETTINGS_FILE, env=env)

    conns = {conn.conn_id: conn for conn in settings.connections}
    assert (conns["conveyor_ledger"].host, conns["conveyor_ledger"].port) == ("/tmp/pg-socket", 6543)
    assert conns["conveyor_ledger"].password == "s3cr$t"
    assert conns["conveyor_llm"].password == "sk-test"
    assert conns["conveyor_llm"].extra == {"model": "openai:gpt-4.1-mini"}
    variables = {var.key: var.value for var in settings.variables}
    assert variables == {
        "conveyor_invoice_approval_threshold": "12000",
        "conveyor_alert_email": "ops@example.com",
        "conveyor_supplier_extract": "feeds/supplier_exceptions/extract.csv",
        "conveyor_invoice_inbox": "s3://acme-feeds/invoices/inbox",
        "conveyor_inspection_notes": "feeds/inspection_notes.csv",
    }


@pytest.mark.parametrize(
    ("text", "env", "expected"),
    [
        ("${A}", {"A": "x"}, "x"),
        ("${A:-d}", {}, "d"),
        ("${A:-d}", {"A": ""}, "d"),
        ("${A:-}", {}, ""),
        ("pre-${A}-${B:-b}-post", {"A": "a"}, "pre-a-b-post"),
        ("pa$$word", {}, "pa$word"),
        ("$${A}", {"A": "x"}, "${A}"),
        ("no refs, $5 and a $ sign", {}, "no refs, $5 and a $ sign"),
    ],
)
def test_references(text, env, expected):
    assert resolve_references(text, env, "here") == expected


def test_unset_variable_without_default_is_an_error_naming_it(tmp_path):
    path = write(
        tmp_path,
        "airflow:\n  variables:\n    - variable_name: v\n      variable_value: ${NOT_SET_ANYWHERE}\n",
    )

    with pytest.raises(SettingsFileError, match=r"airflow.variables\[0\].*NOT_SET_ANYWHERE is not set"):
        read_settings_file(path, env={})


def test_unclosed_reference_is_an_error(tmp_path):
    path = write(tmp_path, "airflow:\n  variables:\n    - variable_name: v\n      variable_value: ${OOPS\n")

    with pytest.raises(SettingsFileError, match="malformed environment reference"):
        read_settings_file(path, env={"OOPS": "x"})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "airflow:\n  connections:\n    - conn_type: postgres\n      conn_host: db\n",
            r"airflow.connections\[0\]: conn_id is required",
        ),
        (
            "airflow:\n  connections:\n    - conn_id: c\n      conn_host: db\n",
            r"airflow.connections\[0\] \(c\): conn_type is required",
        ),
        ("airflow:\n  connections: [\n", r"not valid YAML at line \d+"),
        (
            "airflow:\n  connections:\n    - conn_id: c\n      conn_type: http\n      conn_hots: typo\n",
            r"unknown field\(s\) conn_hots",
        ),
        (
            "airflow:\n  connections:\n    - conn_id: c\n      conn_type: http\n      conn_port: eighty\n",
            r"conn_port must be an integer, got 'eighty'",
        ),
        (
            "airflow:\n  connections:\n    - conn_id: c\n      conn_type: http\n      conn_extra: '[1, 2]'\n",
            r"conn_extra must be a mapping",
        ),
        (
            "airflow:\n  connections:\n    - conn_id: c\n      conn_type: http\n      conn_extra: '{bad'\n",
            r"conn_extra is not valid JSON",
        ),
        (
            "airflow:\n  connections:\n    - {conn_id: c, conn_type: http}\n"
            "    - {conn_id: c, conn_type: http}\n",
            r"airflow.connections\[1\]: duplicate conn_id 'c'",
        ),
        ("airflow:\n  pools:\n    - pool_name: p\n", r"\(p\): pool_slot is required"),
        ("airflow:\n  pools:\n    - {pool_name: p, pool_slot: -5}\n", r"pool_slot must be at least -1"),
        ("airflow:\n  variables:\n    - variable_name: v\n", r"variable_value is required"),
        (
            "airflow:\n  connection:\n    - {conn_id: c, conn_type: http}\n",
            r"unknown section\(s\) airflow.connection",
        ),
        ("airflow:\n  connections:\n    conn_id: c\n", r"airflow.connections must be a list"),
        ("- just a list\n", r"expected a top-level 'airflow:' mapping"),
    ],
)
def test_malformed_files_are_refused_with_the_place_named(tmp_path, text, message):
    path = write(tmp_path, text)

    with pytest.raises(SettingsFileError, match=message) as raised:
        read_settings_file(path, env={})
    assert str(path) in str(raised.value)


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(SettingsFileError, match="no such settings file"):
        read_settings_file(tmp_path / "nope.yaml")


def test_astro_template_placeholders_are_skipped(tmp_path):
    # `astro dev init` ships entries with every field empty.
    path = write(
        tmp_path,
        "airflow:\n  connections:\n    - conn_id:\n      conn_type:\n      conn_host:\n      conn_extra:\n"
        "  pools:\n    - pool_name:\n      pool_slot:\n      pool_description:\n"
        "  variables:\n    - variable_name:\n      variable_value:\n",
    )

    settings = read_settings_file(path, env={})

    assert (settings.connections, settings.pools, settings.variables) == ((), (), ())
    assert settings.skipped_blank == 3


def test_value_types_follow_airflow(tmp_path):
    path = write(
        tmp_path,
        "airflow:\n  connections:\n"
        "    - {conn_id: c, conn_type: http, conn_port: '8080',\n"
        "       conn_extra: '{\"a\": 1}', conn_password: ''}\n"
        "  variables:\n"
        "    - {variable_name: n, variable_value: 5000}\n"
        "    - {variable_name: b, variable_value: true}\n"
        "    - {variable_name: j, variable_value: {k: [1, 2]}}\n"
        "    - {variable_name: e, variable_value: ''}\n",
    )

    settings = read_settings_file(path, env={})

    conn = settings.connections[0]
    assert (conn.port, conn.extra, conn.password) == (8080, {"a": 1}, None)
    assert {var.key: var.value for var in settings.variables} == {
        "n": "5000",
        "b": "true",
        "j": '{"k": [1, 2]}',
        "e": "",
    }
