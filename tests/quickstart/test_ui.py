"""The quickstart ends with how to look: its airflow.cfg, stable logins, and `conveyor ui`."""

from __future__ import annotations

import configparser
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def test_logins_are_made_once_and_kept(tmp_path):
    from conveyor.quickstart.serve import logins

    first = logins(tmp_path)
    assert set(first) == {"director", "reviewer"} and first["director"][0] == "admin"
    assert logins(tmp_path) == first
    assert oct((tmp_path / "logins.json").stat().st_mode & 0o777) == "0o600"


def test_airflow_cfg_names_the_real_metadata_db_and_keeps_other_keys(tmp_path, monkeypatch):
    from conveyor.quickstart.serve import configure, logins

    monkeypatch.delenv("AIRFLOW_HOME", raising=False)
    cfg_path = tmp_path / "airflow" / "airflow.cfg"
    cfg_path.parent.mkdir()
    cfg_path.write_text("[core]\nfernet_key = kept-key\n[database]\nsql_alchemy_conn = sqlite:////x/airflow.db\n")
    url = "postgresql+psycopg2://postgres@/airflow?host=%2Ftmp%2Fpg"

    assert configure(tmp_path, repo=REPO, sql_alchemy_conn=url) == cfg_path

    cfg = configparser.ConfigParser()  # interpolating, as Airflow reads it
    cfg.read(cfg_path)
    assert cfg.get("database", "sql_alchemy_conn") == url
    assert cfg.get("core", "fernet_key") == "kept-key"
    assert cfg.get("core", "dags_folder") == str(REPO / "dags")
    assert cfg.get("core", "simple_auth_manager_users") == "director:admin,reviewer:user"
    saved = json.loads(Path(cfg.get("core", "simple_auth_manager_passwords_file")).read_text())
    assert saved == {name: password for name, (_, password) in logins(tmp_path).items()}


def _clean_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a new user's shell: none of the test session's Airflow or ledger settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "CONVEYOR"))}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")  # never the machine's own ~/.config
    env["PATH"] = f"{BIN}:{env.get('PATH', '')}"
    return env


@pytest.mark.slow
# Its steps carry their own time limits (the quickstart 900 s, the UI 240 s); pytest's default 600 s
# cut it off once, in a whole-suite run with no bytecode where the quickstart alone took ~6 min.
@pytest.mark.timeout(1300)
def test_the_quickstart_ends_with_the_ui_on_its_own_databases(tmp_path):
    """Run the quickstart (one workflow), start `conveyor ui` from another directory, log in with
    the printed credentials over REST, see the quickstart's run, stop it."""
    import httpx

    # Its embedded PostgreSQL runs as another user, so its folder must stay reachable for it: not under
    # pytest's /tmp/pytest-of-root, which any other pytest session starting meanwhile (a developer's
    # run beside the suite) sets back to 0700, and the server then PANICs at its next checkpoint.
    home = Path(tempfile.mkdtemp(prefix="conveyor-quickstart-home-"))
    env = _clean_env(tmp_path)
    quickstart = subprocess.run([str(REPO / "scripts" / "quickstart"), "--only", "inspection_notes"],
                                env={**env, "CONVEYOR_HOME": str(home)}, capture_output=True, text=True,
                                timeout=900)  # fmt: skip
    try:
        assert quickstart.returncode == 0, quickstart.stdout[-3000:] + quickstart.stderr[-3000:]
        run_id = re.search(r"=== inspection_notes: run (\S+) -> success", quickstart.stdout).group(1)
        assert "Open the UI:       .venv/bin/conveyor ui" in quickstart.stdout
        printed = dict(re.findall(r"^  (director|reviewer)\s+(\S+)\s", quickstart.stdout, re.M))
        cfg = configparser.ConfigParser()
        cfg.read(home / "airflow" / "airflow.cfg")
        assert cfg.get("database", "sql_alchemy_conn").startswith("postgresql+psycopg2://postgres@/airflow?host=")

        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        port = _free_port()
        ui = subprocess.Popen([str(BIN / "conveyor"), "ui", "--port", str(port)], env=env, cwd=elsewhere,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              start_new_session=True)  # fmt: skip
        try:
            out = _read_until(ui, "Ctrl-C stops it.", timeout=240)
            assert f"Airflow UI: http://127.0.0.1:{port}" in out
            shown = dict(re.findall(r"^  (director|reviewer)\s+(\S+)\s", out, re.M))
            assert shown == printed and set(shown) == {"director", "reviewer"}  # the same logins as the run's
            base = f"http://127.0.0.1:{port}"
            token = httpx.post(f"{base}/auth/token", json={"username": "reviewer", "password": shown["reviewer"]},
                               timeout=30).json()["access_token"]  # fmt: skip
            runs = httpx.get(f"{base}/api/v2/dags/inspection_notes/dagRuns",
                             headers={"Authorization": f"Bearer {token}"}, timeout=30)  # fmt: skip
            assert runs.status_code == 200, runs.text
            assert run_id in [r["dag_run_id"] for r in runs.json()["dag_runs"]]
            assert httpx.post(f"{base}/auth/token", json={"username": "reviewer", "password": "wrong"},
                              timeout=30).status_code == 401  # fmt: skip
        finally:
            os.killpg(ui.pid, signal.SIGTERM)
            code = ui.wait(timeout=60)
        assert code == 0
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"http://127.0.0.1:{port}/api/v2/monitor/health", timeout=2)
    finally:
        subprocess.run([sys.executable, "-m", "conveyor.quickstart.embedded_db", "--stop"],
                       env={**env, "CONVEYOR_HOME": str(home)}, timeout=120)  # fmt: skip
    assert not (home / "pgdata" / "postmaster.pid").exists()
    shutil.rmtree(home, ignore_errors=True)


def _free_port() -> int:
    from conveyor.quickstart.api_server import free_port

    return free_port()


def _read_until(process: subprocess.Popen[str], marker: str, timeout: float) -> str:
    """The process's output up to the line holding ``marker`` (read by a thread: a pipe's lines
    can wait in the reader's buffer where a select() on the pipe no longer sees them)."""
    import queue
    import threading

    lines: queue.Queue[str] = queue.Queue()
    assert process.stdout is not None
    stream = process.stdout
    threading.Thread(target=lambda: [lines.put(line) for line in stream], daemon=True).start()
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=1)
        except queue.Empty:
            if process.poll() is not None:
                break
            continue
        seen.append(line)
        if marker in line:
            return "".join(seen)
    raise AssertionError(f"no {marker!r} in time; output:\n{''.join(seen)[-3000:]}")
