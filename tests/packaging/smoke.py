"""The wheel's smoke test, run by the python of a clean virtual environment the wheel was installed in.

    <venv>/bin/python smoke.py PROJECT_DIR LEDGER_URI

``PROJECT_DIR`` is a user's Airflow project in the Astro CLI layout (``dags/``, ``include/``, an
empty ``plugins/``), with nothing of this repository's source tree. The script checks, with the
environment's own ``airflow`` and ``conveyor`` commands:

1. ``airflow db migrate`` on a fresh metadata DB (SQLite in the project);
2. the plugin is registered once (``airflow plugins``), with no plugin import error;
3. the provider and its ``[conveyor]`` config section are known (``airflow providers list``,
   ``airflow config get-value conveyor ledger_conn_id``);
4. every bundled DAG parses from the project, with no import error;
5. the plugin's review API answers on the environment's own ``airflow api-server`` (Airflow's
   authentication in front of it: 401 without a token);
6. one bundled DAG (``inspection_notes``) runs end to end with ``airflow dags test``, a person
   (this script, through that review API) rejecting what waits for review.

It prints one JSON line with what it saw and exits 0 only when every check held.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

import httpx  # a dependency of the package: the reviewer below is any HTTP client

#: The smoke reviewer's password (simple auth manager).
PASSWORD = "smoke-reviewer"

#: Seconds each command took, in the order run (the report's ``seen.seconds``: where a slow smoke spends them).
SECONDS: dict[str, float] = {}


def run(bin_dir: Path, *args: str, env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    started = time.monotonic()
    try:
        return subprocess.run([str(bin_dir / args[0]), *args[1:]], env=env, capture_output=True, text=True,
                              timeout=timeout)
    finally:
        SECONDS[" ".join(args[:3]) if args[0] != "python" else "parse the DAGs"] = round(time.monotonic() - started, 1)


def todays_notes(project: Path) -> Path:
    """The sample notes dated today (the suite refuses notes older than 90 days)."""
    source = project / "include" / "data" / "inspection_notes" / "notes.csv"
    rows = list(csv.DictReader(source.open(encoding="utf-8")))
    today = datetime.now(UTC).date().isoformat()
    for row in rows:
        if row["inspected_on"] <= today:
            row["inspected_on"] = today
    target = project / "notes_today.csv"
    with target.open("w", newline="", encoding="utf-8") as out:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return target


def start_api_server(bin_dir: Path, env: dict[str, str], project: Path) -> tuple[subprocess.Popen[bytes], str]:
    """The environment's ``airflow api-server`` on a free port, one simple-auth user ``smoke``."""
    from conveyor.quickstart.api_server import free_port  # the wheel's own

    port = free_port()
    passwords = project / "simple_auth_passwords.json"
    passwords.write_text(json.dumps({"smoke": PASSWORD}))
    url = f"http://127.0.0.1:{port}"
    server_env = {**env, "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "smoke:admin",
                  "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
                  "AIRFLOW__API_AUTH__JWT_SECRET": "conveyor-smoke", "AIRFLOW__API__BASE_URL": url}
    server = subprocess.Popen(
        [str(bin_dir / "airflow"), "api-server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
        env=server_env, stdout=(project / "api-server.log").open("a"), stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    return server, url


def stop(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=20)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)


def main(project: Path, ledger_uri: str) -> int:
    bin_dir = Path(sys.executable).parent
    env = {
        "PATH": f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "HOME": str(project),
        "AIRFLOW_HOME": str(project / "airflow-home"),
        "AIRFLOW__CORE__DAGS_FOLDER": str(project / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(project / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE": "True",  # as docker-compose.yaml sets it
        "AIRFLOW_CONN_CONVEYOR_LEDGER": ledger_uri,
        "AIRFLOW__CONVEYOR__REVIEW_POKE_SECONDS": "1",
        "CONVEYOR_HOME": str(project / "conveyor-home"),
    }
    seen: dict[str, object] = {}
    checks: dict[str, bool] = {}

    migrate = run(bin_dir, "airflow", "db", "migrate", env=env)
    checks["metadata_db_migrated"] = migrate.returncode == 0
    # Once the first command has written airflow.cfg, the checks that only read run side by side.
    parse_code = (
        "import json, sys; from airflow.dag_processing.dagbag import DagBag; "
        f"sys.path.append({str(project / 'dags')!r}); "
        f"bag = DagBag(dag_folder={str(project / 'dags')!r}); "
        "print(json.dumps({'dags': sorted(bag.dag_ids), 'errors': bag.import_errors}))"
    )
    commands = {
        "plugins": ("airflow", "plugins", "--output", "json"),
        "providers": ("airflow", "providers", "list", "--output", "json"),
        "option": ("airflow", "config", "get-value", "conveyor", "ledger_conn_id"),
        "upgrade": ("conveyor", "db", "upgrade"),
        "parse": ("python", "-c", parse_code),
    }
    with ThreadPoolExecutor(len(commands)) as pool:
        futures = {name: pool.submit(run, bin_dir, *args, env=env) for name, args in commands.items()}
    plugins, providers, option, upgrade, parse = (futures[name].result() for name in commands)
    listed = [p for p in json.loads(plugins.stdout or "[]") if p.get("name") == "conveyor"]
    checks["plugin_registered_once"] = len(listed) == 1 and "already registered" not in plugins.stderr
    checks["provider_known"] = any(p.get("package_name") == "airflow-provider-conveyor"
                                   for p in json.loads(providers.stdout or "[]"))
    checks["config_section_known"] = option.stdout.strip().splitlines()[-1:] == ["conveyor_ledger"]
    checks["ledger_migrated"] = upgrade.returncode == 0

    parsed = (
        json.loads(parse.stdout.strip().splitlines()[-1]) if parse.returncode == 0 else {"error": parse.stderr[-500:]}
    )
    seen["dags"] = parsed
    checks["dags_parse"] = parsed.get("errors") == {} and {
        "supplier_exceptions", "invoice_processing", "inspection_notes", "workflow_health"} <= set(parsed["dags"])

    api, api_url = start_api_server(bin_dir, env, project)
    notes = todays_notes(project)
    started = time.monotonic()
    test = subprocess.Popen(
        [str(bin_dir / "airflow"), "dags", "test", "inspection_notes", "-c", json.dumps({"extract_path": str(notes)})],
        # The log is unbuffered, so its tail is where the run was; on a timeout SIGABRT below makes
        # faulthandler print every thread's stack into it.
        env={**env, "PYTHONFAULTHANDLER": "1", "PYTHONUNBUFFERED": "1"},
        stdout=(project / "dags-test.log").open("w"), stderr=subprocess.STDOUT,
    )
    rejected, unauthenticated, restarts = 0, None, 0
    reviewer: httpx.Client | None = None
    while test.poll() is None and time.monotonic() - started < 480:
        if api.poll() is not None and reviewer is None:
            # The port was free when probed and taken before the server bound it (another test's
            # server, under xdist; seen in CI: "address already in use", then 480 s of refused
            # connections): a server on another port.
            restarts += 1
            seen["api_server_restarts"] = restarts
            if restarts > 3:
                break
            api, api_url = start_api_server(bin_dir, env, project)
        try:
            if reviewer is None:  # the API server may still be starting
                unauthenticated = httpx.get(f"{api_url}/conveyor/api/review/queue", timeout=10).status_code
                token = httpx.post(f"{api_url}/auth/token", json={"username": "smoke", "password": PASSWORD},
                                   timeout=10).json()["access_token"]
                reviewer = httpx.Client(base_url=api_url, headers={"Authorization": f"Bearer {token}"}, timeout=30)
            queue = reviewer.get("/conveyor/api/review/queue", params={"workflow": "inspection_notes", "limit": 100})
            queue.raise_for_status()
            for entry in queue.json()["items"]:
                decided = reviewer.post(f"/conveyor/api/review/items/{quote(entry['item_id'], safe='')}/decision",
                                        json={"action": "reject", "comment": "checked by the smoke test"})
                decided.raise_for_status()
                rejected += 1
        except (httpx.HTTPError, KeyError, ValueError) as exc:  # not up yet, or the ledger holds no workflow yet
            seen["reviewer_note"] = repr(exc)[:200]
        time.sleep(1)
    if reviewer is not None:
        reviewer.close()
    stop(api)
    if test.poll() is None:
        seen["dag_test_timed_out"] = True
        test.send_signal(signal.SIGABRT)
        try:
            test.wait(timeout=10)
        except subprocess.TimeoutExpired:
            test.kill()
    log = (project / "dags-test.log").read_text(errors="replace")
    os.environ.update(env)
    from conveyor.ledger import Ledger

    counts = Ledger().count_by_status(workflow="inspection_notes")
    checks["review_api_behind_airflow_auth"] = unauthenticated == 401 and rejected > 0
    seen.update({"dag_test_rc": test.returncode, "rejected": rejected, "items": counts,
                 "seconds": {**SECONDS, "airflow dags test": round(time.monotonic() - started, 1)}})
    checks["dag_runs_end_to_end"] = (test.returncode == 0 and "state=success" in log
                                     and counts.get("published", 0) > 0 and set(counts) <= {"published", "rejected"})
    print(json.dumps({"checks": checks, "seen": seen}))
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), sys.argv[2]))
