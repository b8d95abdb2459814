"""Run the bundled workflows on the sample data, answer the reviews as a scripted reviewer,
and print what happened to every item.

``python -m conveyor.quickstart.run`` (called by ``./scripts/quickstart``) expects the Airflow
environment prepared by that script (metadata DB migrated, ledger upgraded, settings loaded).
It starts an Airflow API server on the same metadata DB (the director's sign-off and the review
API go through it), runs each DAG with ``dag.test()``, and while a run waits it acts as the
people: reviewers decide the review queue through Conveyor's API, the director approves the
report through Airflow's own HITL API.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import secrets
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from conveyor.ledger.connection import conveyor_home
from conveyor.quickstart.api_server import ApiServer, running_api_server
from conveyor.quickstart.mailbox import local_mailbox

REPO = Path(__file__).resolve().parents[3]

#: item (as the review API returns it) -> (action, comment)
Policy = Callable[[dict[str, Any]], tuple[str, str]]


def reviewer_policy(item: dict[str, Any]) -> tuple[str, str]:
    """What the scripted reviewer decides: bad input is rejected, doubtful AI output is checked
    and approved unless the model was close to guessing."""
    if item["status"] == "quarantined":
        return "reject", f"bad input, sent back to the feed owner: {item.get('reason') or 'see checks'}"
    confidence = item.get("confidence")
    if confidence is not None and confidence < 0.3:
        return "reject", f"model was guessing (confidence {confidence:.2f}); handled by hand"
    return "approve", "checked the draft against the notes"


@dataclass
class WorkflowRun:
    dag_id: str
    workflow: str | None
    conf: dict[str, Any] = field(default_factory=dict)
    policy: Policy = reviewer_policy


class ScriptedReviewer(threading.Thread):
    """Plays the people while a run waits: the review queue, then the director's sign-off."""

    def __init__(self, api: ApiServer, run: WorkflowRun, run_id: str, interval: float = 1.0) -> None:
        super().__init__(name=f"reviewer-{run.dag_id}", daemon=True)
        self.api = api
        self.run_spec = run
        self.run_id = run_id
        self.interval = interval
        self.stopped = threading.Event()
        self.decisions: dict[str, int] = {}
        self.signoffs = 0
        self.errors: list[str] = []

    def stop(self) -> None:
        self.stopped.set()
        self.join(timeout=30)

    def run(self) -> None:
        with self.api.client("reviewer") as reviewer, self.api.client("director") as director:
            while not self.stopped.is_set():
                try:
                    if self.run_spec.workflow:
                        self._review(reviewer)
                    self._sign_off(director)
                except Exception as exc:  # keep playing; the run's own timeout escalates if we fail
                    self.errors.append(f"{type(exc).__name__}: {exc}")
                self.stopped.wait(self.interval)

    def _review(self, client: Any) -> None:
        page = client.get("/conveyor/api/review/queue",
                          params={"workflow": self.run_spec.workflow, "run_id": self.run_id, "limit": 200})
        page.raise_for_status()
        for item in page.json()["items"]:
            action, comment = self.run_spec.policy(item)
            response = client.post(f"/conveyor/api/review/items/{quote(item['item_id'], safe='')}/decision",
                                   json={"action": action, "comment": comment})
            if response.status_code == 200:
                self.decisions[action] = self.decisions.get(action, 0) + 1
            elif response.status_code != 409:  # 409: decided meanwhile, fine
                response.raise_for_status()

    def _sign_off(self, client: Any) -> None:
        base = f"/api/v2/dags/{self.run_spec.dag_id}/dagRuns/{quote(self.run_id, safe='')}"
        details = client.get(f"{base}/hitlDetails")
        if details.status_code == 404:
            return
        details.raise_for_status()
        for detail in details.json().get("hitl_details", []):
            if detail.get("response_received"):
                continue
            ti = detail["task_instance"]
            response = client.patch(
                f"{base}/taskInstances/{ti['task_id']}/{ti.get('map_index', -1)}/hitlDetails",
                json={"chosen_options": ["Approve"]},
            )
            if response.status_code == 200:
                self.signoffs += 1
            elif response.status_code != 409:
                response.raise_for_status()


def load_dag(dag_id: str, folder: Path) -> Any:
    """The DAG object of ``dag_id`` from the bundled DAG files."""
    from airflow.sdk import DAG

    for path in sorted(folder.glob("*.py")):
        spec = importlib.util.spec_from_file_location(f"conveyor_bundled_{path.stem}", path)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        for value in vars(module).values():
            if isinstance(value, DAG) and value.dag_id == dag_id:
                return value
    raise LookupError(f"no DAG {dag_id!r} in {folder}")


@contextmanager
def deadlines_left_to_the_scheduler(dag: Any) -> Iterator[None]:
    """Run ``dag.test()`` without the DAG's Deadline Alerts.

    Airflow 3.3.2's ``dag.test()`` cannot finish a run of a DAG that declares a ``DeadlineAlert``:
    when the run succeeds, ``DagRun.update_state`` looks the alerts up by id, but the DAG that
    ``dag.test()`` builds holds them serialized (``psycopg2.ProgrammingError: can't adapt type
    'dict'``). Deadlines are evaluated by the scheduler, never by ``dag.test()``, so nothing
    observable is lost; a scheduled run keeps them.
    """
    saved = dag.deadline
    dag.deadline = None
    try:
        yield
    finally:
        dag.deadline = saved


def run_workflow(api: ApiServer, spec: WorkflowRun, folder: Path) -> tuple[Any, ScriptedReviewer]:
    from airflow.models.dagrun import DagRun
    from airflow.utils.types import DagRunType

    dag = load_dag(spec.dag_id, folder)
    now = datetime.now(UTC).replace(microsecond=0)
    run_id = DagRun.generate_run_id(run_type=DagRunType.MANUAL, logical_date=now, run_after=now)
    reviewer = ScriptedReviewer(api, spec, run_id)
    reviewer.start()
    try:
        with deadlines_left_to_the_scheduler(dag):
            result = dag.test(logical_date=now, run_after=now, run_conf=spec.conf)
    finally:
        reviewer.stop()
    return result, reviewer


def summarize(spec: WorkflowRun, dag_run: Any, reviewer: ScriptedReviewer) -> list[str]:
    from conveyor.ledger import Ledger

    lines = [f"\n=== {spec.dag_id}: run {dag_run.run_id} -> {dag_run.state}"]
    failed = [ti.task_id for ti in dag_run.get_task_instances() if ti.state == "failed"]
    if failed:
        lines.append(f"  failed tasks: {', '.join(failed)}")
    if spec.workflow:
        ledger = Ledger()
        counts = ledger.count_by_status(workflow=spec.workflow, run_id=dag_run.run_id)
        lines.append("  items per status: " + (", ".join(f"{s} {n}" for s, n in counts.items()) or "none"))
        waiting = sum(counts.get(s, 0) for s in ("quarantined", "pending_review"))
        lines.append(f"  awaiting review: {waiting}")
        decided = ", ".join(f"{a} {n}" for a, n in sorted(reviewer.decisions.items())) or "none"
        lines.append(f"  scripted reviewer decisions: {decided}; director sign-offs: {reviewer.signoffs}")
        report = ledger.effects("publish_report", [f"{spec.workflow}:report:{dag_run.run_id}"])
        for effect in report.values():
            lines.append(f"  report: {effect['result']['path']} ({len(effect['result']['items'])} items)")
        with ledger.connect() as conn:
            paid = conn.execute(
                "SELECT count(*), coalesce(sum(amount), 0) FROM conveyor.payments WHERE run_id = %s",
                (dag_run.run_id,),
            ).fetchone()
        if paid and paid[0]:
            lines.append(f"  payments made: {paid[0]} totalling {paid[1]:,.2f}")
    for error in reviewer.errors[-3:]:
        lines.append(f"  reviewer error: {error}")
    return lines


def todays_runs(home: Path, include: Path) -> list[WorkflowRun]:
    """The three workflows, fed with today's delivery of the sample data (see sample_feeds)."""
    from conveyor.quickstart import sample_feeds

    today = datetime.now(UTC).date()
    delivery = sample_feeds.next_delivery(home)
    extract = sample_feeds.supplier_extract(
        include / "data" / "supplier_exceptions" / "extract.csv", home / "feeds", delivery, today
    )
    inbox = home / "inbox"
    sample_feeds.invoice_inbox(include / "data" / "invoices" / "inbox", inbox, delivery, today)
    return [
        WorkflowRun("supplier_exceptions", "supplier_exceptions", {"extract_path": str(extract)}),
        WorkflowRun("invoice_processing", "invoice_processing", {"inbox_path": str(inbox)}),
        WorkflowRun("workflow_health", None),
    ]


def alert_route(port: int) -> dict[str, str]:
    """Airflow connection and Variable sending alert e-mails to the local mailbox."""
    return {
        "AIRFLOW_CONN_CONVEYOR_SMTP": json.dumps({
            "conn_type": "smtp", "host": "127.0.0.1", "port": port,
            "extra": {"disable_ssl": True, "disable_tls": True, "from_email": "conveyor@localhost",
                      "timeout": 10, "retry_limit": 1},
        }),
        "AIRFLOW_VAR_CONVEYOR_ALERT_EMAIL": os.environ.get("AIRFLOW_VAR_CONVEYOR_ALERT_EMAIL", "ops@localhost"),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run the bundled Conveyor workflows on the sample data.")
    parser.add_argument("--only", nargs="*", metavar="DAG_ID", help="run only these DAGs")
    args = parser.parse_args(argv)
    home = conveyor_home()
    include = Path(os.environ.get("CONVEYOR_INCLUDE", REPO / "include"))
    runs = [r for r in todays_runs(home, include) if not args.only or r.dag_id in args.only]
    users = {"director": ("admin", secrets.token_urlsafe(12)),
             "reviewer": ("user", secrets.token_urlsafe(12))}
    folder = Path(os.environ.get("AIRFLOW__CORE__DAGS_FOLDER", REPO / "dags"))
    report: list[str] = []
    ok = True
    print("==> starting the Airflow API server (sign-offs and the review API go through it)", flush=True)
    with running_api_server(home / "api-server", users) as api, local_mailbox(home / "mail") as (port, mails):
        os.environ.update(alert_route(port))
        print(f"    {api.url} (log: {api.log_path}); alert e-mails go to {home / 'mail'}", flush=True)
        for spec in runs:
            print(f"==> running {spec.dag_id}", flush=True)
            started = time.monotonic()
            dag_run, reviewer = run_workflow(api, spec, folder)
            report += summarize(spec, dag_run, reviewer)
            report.append(f"  took {time.monotonic() - started:.0f} s")
            ok = ok and dag_run.state == "success"
        report.append(f"\n=== alerts e-mailed to a person: {len(mails)} (in {home / 'mail'})")
        report += [f"  {subject}" for subject in mails]
    print("\n".join(report))
    print("\nLook up any item:  .venv/bin/conveyor items --workflow supplier_exceptions --limit 5")
    print("                   .venv/bin/conveyor status <item id>;  .venv/bin/conveyor queue")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
