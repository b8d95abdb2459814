"""200 runs waiting on human review at once, on a real Airflow stack.

Starts a real Airflow (api-server, scheduler, dag-processor, triggerer, LocalExecutor) on a scratch
metadata DB and a scratch ledger, routes one item of each of N runs to review, triggers N runs of a
DAG whose only task is a deferrable ``HumanReviewSensor``, and measures while they all wait:

* worker slots held: task instances ``running`` or ``queued`` during the wait (goal 0), next to
  the ``deferred`` ones;
* ledger queries per poll interval: transactions the ledger database committed during the window
  (``pg_stat_database.xact_commit``; only the triggerer touches the ledger then), divided by the
  number of poll intervals, next to the number of waiting runs (what one query per trigger per
  interval would cost), and the triggerer's connections to the ledger;
* triggerer CPU: CPU seconds of the triggerer process tree per wall second, idle (no trigger)
  against N waiting triggers;
* wake-up: after every item is decided (one set-based ledger transition), how long until every
  sensor left ``deferred``, and until every run succeeded.

Run by hand: ``.venv/bin/python bench/review.py [--runs 200] [--poll 5] [--window 30]``
(several minutes on two cores: each of the N sensor tasks starts once before deferring, and once
more to finish).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import psutil
import psycopg
from _pg import drop, scratch_database

from conveyor.ledger import Ledger, NewItem
from conveyor.ledger.store import ItemUpdate
from tests.support import postgres
from tests.support.airflow_env import create_metadata_db

REPO = Path(__file__).resolve().parents[1]
WF = "review_bench"
DAG_FILE = """
from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from conveyor.review.sensors import HumanReviewSensor

with DAG("review_bench", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
         max_active_runs={runs}, max_active_tasks={runs}, is_paused_upon_creation=False):
    HumanReviewSensor(task_id="wait_for_review", workflow="review_bench", poke_interval={poll},
                      timeout=3600, escalation="fail")
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(what: str, check: Callable[[], bool], timeout: float, every: float = 1.0) -> float:
    started = time.monotonic()
    while not check():
        if time.monotonic() - started > timeout:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(every)
    return time.monotonic() - started


class Stack:
    """The Airflow processes of the benchmark, each in its own process group."""

    def __init__(self, env: dict[str, str], logs: Path) -> None:
        self.env = env
        self.logs = logs
        self.processes: dict[str, subprocess.Popen] = {}

    def start(self, name: str, *args: str) -> subprocess.Popen:
        log = (self.logs / f"{name}.log").open("wb")
        process = subprocess.Popen(
            [str(Path(sys.executable).with_name("airflow")), *args],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.processes[name] = process
        return process

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + 20
        for process in self.processes.values():
            try:
                process.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)

    def cpu_seconds(self, name: str) -> float:
        root = psutil.Process(self.processes[name].pid)
        total = 0.0
        for proc in [root, *root.children(recursive=True)]:
            try:
                times = proc.cpu_times()
                total += times.user + times.system
            except psutil.NoSuchProcess:
                continue
        return total


def ti_states(meta_dsn: str) -> dict[str, int]:
    with psycopg.connect(meta_dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT coalesce(state, 'none'), count(*) FROM task_instance WHERE dag_id = %s GROUP BY 1", (WF,)
        ).fetchall()
    return dict(rows)


def run_states(meta_dsn: str) -> dict[str, int]:
    with psycopg.connect(meta_dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT state, count(*) FROM dag_run WHERE dag_id = %s GROUP BY 1", (WF,)
        ).fetchall()
    return dict(rows)


# The probes below connect to the metadata DB and read the cluster-wide statistics views, so they
# add no transaction of their own to the ledger database they measure.


def ledger_commits(meta_dsn: str, ledger_db: str) -> int:
    with psycopg.connect(meta_dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = %s", (ledger_db,)
        ).fetchone()
    return int(row[0])


def trigger_connections(meta_dsn: str, ledger_db: str) -> int:
    with psycopg.connect(meta_dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'conveyor-review-trigger'"
            " AND datname = %s",
            (ledger_db,),
        ).fetchone()
    return int(row[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--poll", type=float, default=5.0, help="sensor poke/poll interval, seconds")
    parser.add_argument("--window", type=float, default=30.0, help="steady-state measurement window, seconds")
    parser.add_argument("--parallelism", type=int, default=8, help="LocalExecutor slots")
    parser.add_argument("--keep", action="store_true", help="keep the logs folder")
    args = parser.parse_args()

    tag = f"{os.getpid()}"
    meta_db, ledger_db = f"airflow_bench_review_{tag}", f"conveyor_bench_review_{tag}"
    work = Path(tempfile.mkdtemp(prefix="conveyor-bench-review-"))
    dags = work / "dags"
    dags.mkdir()
    (dags / "review_bench.py").write_text(
        textwrap.dedent(DAG_FILE.format(runs=args.runs + 10, poll=args.poll))
    )
    logs = work / "logs"
    logs.mkdir()

    ledger_dsn = scratch_database(ledger_db)
    Ledger(ledger_dsn).upgrade()
    create_metadata_db(meta_db)
    meta_dsn = postgres.dsn_for(meta_db)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = dict(
        os.environ,
        AIRFLOW_HOME=str(work / "airflow"),
        AIRFLOW__CORE__DAGS_FOLDER=str(dags),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__CORE__EXECUTOR="LocalExecutor",
        AIRFLOW__CORE__PARALLELISM=str(args.parallelism),
        AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS="True",
        AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=postgres.sqlalchemy_url_for(meta_db),
        AIRFLOW__API_AUTH__JWT_SECRET="conveyor-bench-jwt-secret",
        AIRFLOW__API__BASE_URL=url,
        AIRFLOW__API__PORT=str(port),
        AIRFLOW__CORE__EXECUTION_API_SERVER_URL=f"{url}/execution/",
        AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST=json.dumps(
            [
                {
                    "name": "dags-folder",
                    "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
                    "kwargs": {"path": str(dags)},
                }
            ]
        ),
        AIRFLOW__SCHEDULER__MAX_TIS_PER_QUERY="512",
        AIRFLOW_CONN_CONVEYOR_LEDGER=postgres.airflow_conn_uri_for(ledger_db),
    )
    env.pop("CONVEYOR_LEDGER_DSN", None)
    stack = Stack(env, logs)
    print(
        f"review bench: {args.runs} runs, poll {args.poll:g}s, window {args.window:g}s, "
        f"{args.parallelism} executor slots, {os.cpu_count()} cores; logs in {logs}"
    )
    try:
        stack.start("api-server", "api-server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1")
        stack.start("scheduler", "scheduler")
        stack.start("dag-processor", "dag-processor")
        stack.start("triggerer", "triggerer")

        def api_up() -> bool:
            try:
                return httpx.get(f"{url}/api/v2/monitor/health", timeout=3).status_code == 200
            except httpx.HTTPError:
                return False

        up = wait_until("the api-server", api_up, 300)
        token = httpx.get(f"{url}/auth/token", timeout=30).json()["access_token"]
        api = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60)
        parsed = wait_until(
            "the DAG to be parsed", lambda: api.get(f"/api/v2/dags/{WF}").status_code == 200, 300
        )
        api.patch(f"/api/v2/dags/{WF}", json={"is_paused": False}).raise_for_status()
        print(f"stack up in {up:.0f}s, DAG parsed {parsed:.0f}s later")

        # Idle triggerer CPU, before any trigger exists.
        time.sleep(5)
        cpu0, t0 = stack.cpu_seconds("triggerer"), time.monotonic()
        time.sleep(args.window / 2)
        idle_cpu = (stack.cpu_seconds("triggerer") - cpu0) / (time.monotonic() - t0)

        # One item of each run waits for a person.
        ledger = Ledger(ledger_dsn)
        run_ids = [f"bench__{i:04d}" for i in range(args.runs)]
        for run_id in run_ids:
            ledger.receive(WF, run_id, [NewItem(run_id, {"run": run_id})], actor="bench.extract#1")
        ids = [f"{WF}:{r}" for r in run_ids]
        ledger.transition(WF, ids, to_status="validated", actor="bench.gate#1")
        ledger.transition(
            WF,
            {i: ItemUpdate(reason="bench: low confidence", review_target="ai_processed") for i in ids},
            to_status="pending_review",
            actor="bench.ai#1",
        )

        started = time.monotonic()
        for run_id in run_ids:
            api.post(
                f"/api/v2/dags/{WF}/dagRuns", json={"dag_run_id": run_id, "logical_date": None}
            ).raise_for_status()
        peak_busy = 0

        def all_deferred() -> bool:
            nonlocal peak_busy
            states = ti_states(meta_dsn)
            peak_busy = max(peak_busy, states.get("running", 0) + states.get("queued", 0))
            return states.get("deferred", 0) == args.runs

        to_deferred = wait_until(f"{args.runs} sensors to defer", all_deferred, 3600, every=2)
        print(
            f"{args.runs} runs triggered; all sensors deferred after {to_deferred:.0f}s "
            f"(peak {peak_busy} slots busy while they started)"
        )

        # Steady state: everyone waits.
        time.sleep(args.poll)
        commits0, cpu0, t0 = (
            ledger_commits(meta_dsn, ledger_db),
            stack.cpu_seconds("triggerer"),
            time.monotonic(),
        )
        held_samples, deferred_samples, conns = [], [], []
        while time.monotonic() - t0 < args.window:
            states = ti_states(meta_dsn)
            held_samples.append(states.get("running", 0) + states.get("queued", 0))
            deferred_samples.append(states.get("deferred", 0))
            conns.append(trigger_connections(meta_dsn, ledger_db))
            time.sleep(1)
        elapsed = time.monotonic() - t0
        busy_cpu = (stack.cpu_seconds("triggerer") - cpu0) / elapsed
        time.sleep(11)  # backends flush their statistics within 10 s of going idle
        commits = ledger_commits(meta_dsn, ledger_db) - commits0
        # The 11 s of flush delay also count queries: scale them in as intervals.
        elapsed_counted = elapsed + 11
        intervals = elapsed_counted / args.poll

        # Everyone decides at once (one set-based transition), then the runs wake up.
        ledger.transition(
            WF, ids, to_status="ai_processed", actor="reviewer:bench", from_status="pending_review"
        )
        woke = wait_until(
            "every sensor to leave deferred",
            lambda: ti_states(meta_dsn).get("deferred", 0) == 0,
            3600,
            every=0.5,
        )
        done = wait_until(
            f"{args.runs} runs to succeed",
            lambda: run_states(meta_dsn).get("success", 0) == args.runs,
            3600,
            every=2,
        )
        failed = run_states(meta_dsn).get("failed", 0)

        print()
        print(
            f"worker slots held while {args.runs} runs wait: max {max(held_samples)}, "
            f"mean {sum(held_samples) / len(held_samples):.2f} (goal 0); "
            f"deferred sensors: min {min(deferred_samples)}, max {max(deferred_samples)}"
        )
        print(
            f"ledger queries per poll interval: {commits / intervals:.2f} "
            f"({commits} in {intervals:.1f} intervals of {args.poll:g}s) for {args.runs} waiting runs; "
            f"one query per trigger would be {args.runs}: ratio {commits / intervals / args.runs:.4f}"
        )
        print(f"triggerer connections to the ledger: max {max(conns)}")
        print(
            f"triggerer CPU: {busy_cpu * 100:.2f}% of one core with {args.runs} waiting triggers, "
            f"{idle_cpu * 100:.2f}% idle: +{(busy_cpu - idle_cpu) * 100:.2f} points "
            f"({(busy_cpu - idle_cpu) / args.runs * 1e3:.3f} ms CPU per trigger per second)"
        )
        print(
            f"wake-up: all {args.runs} sensors left deferred {woke:.1f}s after the decisions "
            f"(poll {args.poll:g}s); all runs succeeded after {done + woke:.0f}s; failed runs: {failed}"
        )
        print(f"total {time.monotonic() - started + up:.0f}s")
    finally:
        stack.stop()
        drop(meta_db)
        drop(ledger_db)
        if args.keep:
            print(f"logs kept in {logs}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
