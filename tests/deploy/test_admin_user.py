"""The admin login of the compose stack, in the file Airflow's SimpleAuthManager reads."""

from __future__ import annotations

import json

import pytest

from conveyor.deploy.admin_user import ensure_admin_user, main


def test_creates_the_user_once_and_keeps_an_existing_password(tmp_path):
    path = tmp_path / "auth" / "passwords.json"

    assert ensure_admin_user(path, "airflow", "airflow") is True
    assert ensure_admin_user(path, "airflow", "changed") is False

    assert json.loads(path.read_text()) == {"airflow": "airflow"}
    assert path.stat().st_mode & 0o077 == 0  # readable by its owner only


def test_keeps_other_users(tmp_path):
    path = tmp_path / "passwords.json"
    path.write_text('{"reviewer": "r-pass"}\n')

    assert ensure_admin_user(path, "admin", "a-pass") is True

    assert json.loads(path.read_text()) == {"reviewer": "r-pass", "admin": "a-pass"}


@pytest.mark.parametrize("content", ["{not json", '["airflow"]'])
def test_refuses_a_file_it_cannot_read(tmp_path, content):
    path = tmp_path / "passwords.json"
    path.write_text(content)

    with pytest.raises(ValueError, match=str(path)):
        ensure_admin_user(path, "airflow", "airflow")
    assert path.read_text() == content


def test_simple_auth_manager_uses_the_written_password(airflow_db, tmp_path, monkeypatch):
    from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager

    path = tmp_path / "passwords.json"
    monkeypatch.setenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE", str(path))
    monkeypatch.setenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS", "airflow:admin")
    monkeypatch.setenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS", "False")
    ensure_admin_user(path, "airflow", "known-password")

    # What the api-server does at start: it must not generate a new password for our admin.
    SimpleAuthManager().init()

    assert SimpleAuthManager.get_passwords() == {"airflow": "known-password"}
    assert [(u.username, u.role) for u in SimpleAuthManager.get_users()] == [("airflow", "admin")]


def test_command_reads_the_compose_environment(tmp_path, monkeypatch, capsys):
    path = tmp_path / "passwords.json"
    monkeypatch.setenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE", str(path))
    monkeypatch.setenv("_AIRFLOW_WWW_USER_USERNAME", "ops")
    monkeypatch.setenv("_AIRFLOW_WWW_USER_PASSWORD", "ops-pass")

    assert main([]) == 0
    assert main([]) == 0

    assert json.loads(path.read_text()) == {"ops": "ops-pass"}
    assert capsys.readouterr().out.splitlines() == [
        f"admin user 'ops' created in {path}",
        f"admin user 'ops' already exists in {path}",
    ]
    monkeypatch.delenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE")
    assert main([]) == 1
