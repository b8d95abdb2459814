"""Run the bundled workflows on today's delivery of the sample data, answer the reviews as a
scripted reviewer, and print what happened to every item.

``python -m conveyor.quickstart.run`` (called by ``./scripts/quickstart``) expects the Airflow
environment prepared by that script (metadata DB migrated, ledger upgraded, settings loaded).
It starts an Airflow API server on the same metadata DB (the director's sign-off and the review
API go through it), runs each DAG with ``dag.test()``, and while a run waits it acts as the
people (:mod:`conveyor.quickstart.reviewer`). The terminal shows one line per step and the
summary; Airflow's own output goes to the log file named at the start.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from conveyor.ledger.connection import conveyor_home
from conveyor.quickstart.api_server import ApiServer, running_api_server
from conveyor.quickstart.dag_test import deadlines_left_to_the_scheduler, manual_run_id, run_dag_test
from conveyor.quickstart.mailbox import local_mailbox
from conveyor.quickstart.quiet import output_to
from conveyor.quickstart.reviewer import ScriptedReviewer, WorkflowRun
from conveyor.quickstart.serve import DEFAULT_PORT, describe_logins, logins

REPO = Path(__file__).resolve().parents[3]

__all__ = ["ScriptedReviewer", "WorkflowRun", "deadlines_left_to_the_scheduler", "load_dag", "main", "run_dag_test"]


def load_dag(dag_id: str, folder: Path) -> Any:
    """The DAG object of ``dag_id`` from the DAG files in ``folder`` (which goes on ``sys.path``,
    as Airflow puts a DAG bundle there, so the DAGs' own helper modules import)."""
    from airflow.sdk import DAG

    if str(folder) not in sys.path:
        sys.path.append(str(folder))
    for path in sorted(folder.glob("*.py")):
        spec = importlib.util.spec_from_file_location(f"conveyor_bundled_{path.stem}", path)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        for value in vars(module).values():
            if isinstance(value, DAG) and value.dag_id == dag_id:
                return value
    raise LookupError(f"no DAG {dag_id!r} in {folder}")


def run_workflow(api: ApiServer, spec: WorkflowRun, folder: Path) -> tuple[Any, ScriptedReviewer]:
    dag = load_dag(spec.dag_id, folder)
    now = datetime.now(UTC).replace(microsecond=0)
    run_id = manual_run_id(now)
    reviewer = ScriptedReviewer(api, spec, run_id)
    reviewer.start()
    try:
        result = run_dag_test(dag, now, spec.conf)
    finally:
        reviewer.stop()
    return result, reviewer


def step_lines(dag_run: Any) -> list[str]:
    """One line per task of the run: its state and how long it took."""
    lines = []
    for ti in sorted(dag_run.get_task_instances(), key=lambda t: t.start_date or datetime.max.replace(tzinfo=UTC)):
        took = (ti.end_date - ti.start_date).total_seconds() if ti.start_date and ti.end_date else 0.0
        lines.append(f"    {ti.task_id:<20} {ti.state or 'none':<16} {took:5.1f} s")
    return lines


def summarize(spec: WorkflowRun, dag_run: Any, reviewer: ScriptedReviewer) -> list[str]:
    from conveyor.ledger import Ledger

    lines = [f"=== {spec.dag_id}: run {dag_run.run_id} -> {dag_run.state}"]
    if spec.workflow:
        ledger = Ledger()
        counts = ledger.count_by_status(workflow=spec.workflow, run_id=dag_run.run_id)
        lines.append("  items per status: " + (", ".join(f"{s} {n}" for s, n in counts.items()) or "none"))
        waiting = sum(counts.get(s, 0) for s in ("quarantined", "pending_review", "pending_approval"))
        lines.append(f"  awaiting review: {waiting}")
        decided = ", ".join(f"{a} {n}" for a, n in sorted(reviewer.decisions.items())) or "none"
        lines.append(f"  scripted reviewer decisions: {decided}; director sign-offs: {reviewer.signoffs}")
        for effect in ledger.effects("publish_report", [f"{spec.workflow}:report:{dag_run.run_id}"]).values():
            result = effect["result"]
            lines.append(f"  published: {', '.join(result['files'])} ({len(result['items'])} items)")
        ids = ledger.item_ids(workflow=spec.workflow, run_id=dag_run.run_id, status=["paid", "archived"])
        if ids:
            paid = [e for e in ledger.effects("pay", ids).values() if e["state"] == "done"]
            lines.append(f"  paid once each: {len(paid)} invoice(s)")
        lines += accuracy_lines(ledger, spec.workflow)
    for error in reviewer.errors[-3:]:
        lines.append(f"  reviewer error: {error}")
    return lines


def accuracy_lines(ledger: Any, workflow: str, days: float = 7) -> list[str]:
    """The guardrail measured, per AI step: the error of what passed unreviewed, from the spot checks."""
    from conveyor.monitoring.accuracy_reads import accuracy_report

    def pct(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.1%}"

    lines = []
    for s in accuracy_report(ledger, workflow, days=days)["steps"]:
        target = f"target {pct(s['max_error_rate'])}" if s["max_error_rate"] is not None else "no target declared"
        recommended = s["recommended_min_confidence"]
        lines.append(
            f"  {s['step']}: {s['spot_checks_sent']} spot check(s) sent, {s['spot_checked']} decided "
            f"({s['spot_wrong']} wrong): error of what passed unreviewed {pct(s['passed_error_rate'])}, "
            f"95% upper bound {pct(s['passed_error_upper'])} ({target}); "
            + (f"recommended min_confidence {recommended:.2f}" if recommended is not None
               else "too few spot checks yet to recommend a threshold")
            + f" (last {days:g} days: conveyor accuracy --workflow {workflow})"
        )  # fmt: skip
    return lines


def todays_runs(home: Path, include: Path) -> list[WorkflowRun]:
    """The bundled workflows, fed with today's delivery of the sample data (see sample_feeds),
    delivered to object storage where the workflows read their feeds."""
    from conveyor import storage
    from conveyor.quickstart import sample_feeds

    today = datetime.now(UTC).date()
    delivery = sample_feeds.next_delivery(home)
    data = include / "data"
    feeds = {
        "supplier_exceptions": sample_feeds.csv_delivery(
            data / "supplier_exceptions" / "extract.csv", key="exception_id", date_column="exception_date",
            delivery=delivery, today=today, plant=sample_feeds.plant_supplier_rows),
        "inspection_notes": sample_feeds.csv_delivery(
            data / "inspection_notes" / "notes.csv", key="inspection_id", date_column="inspected_on",
            delivery=delivery, today=today),
    }
    conf: dict[str, dict[str, Any]] = {}
    for workflow, (name, text) in feeds.items():
        relative = f"feeds/{workflow}/{name}"
        storage.write_text(storage.root() / relative, text)
        conf[workflow] = {"extract_path": relative}
    inbox = storage.root() / "inbox" / "invoice_processing"
    for name, text in sample_feeds.invoice_documents(data / "invoices" / "inbox", delivery, today).items():
        storage.write_text(inbox / name, text)
    return [
        WorkflowRun("supplier_exceptions", "supplier_exceptions", conf["supplier_exceptions"]),
        WorkflowRun("invoice_processing", "invoice_processing", {"inbox_path": "inbox/invoice_processing"}),
        WorkflowRun("inspection_notes", "inspection_notes", conf["inspection_notes"]),
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


def _say(terminal: TextIO, text: str) -> None:
    terminal.write(text + "\n")
    terminal.flush()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run the bundled Conveyor workflows on the sample data.")
    parser.add_argument("--only", nargs="*", metavar="DAG_ID", help="run only these DAGs")
    args = parser.parse_args(argv)
    home = conveyor_home()
    include = Path(os.environ.get("AIRFLOW__CONVEYOR__INCLUDE_FOLDER", REPO / "include"))
    folder = Path(os.environ.get("AIRFLOW__CORE__DAGS_FOLDER", REPO / "dags"))
    log_path = home / "logs" / f"quickstart-{datetime.now(UTC):%Y%m%dT%H%M%S}.log"
    users = logins(home)
    ok = True
    print(f"==> Airflow's own output goes to {log_path}", flush=True)
    with output_to(log_path) as terminal:
        runs = [r for r in todays_runs(home, include) if not args.only or r.dag_id in args.only]
        _say(terminal, "==> starting the Airflow API server (sign-offs and the review API go through it)")
        with running_api_server(home / "api-server", users) as api, local_mailbox(home / "mail") as (port, mails):
            os.environ.update(alert_route(port))
            _say(terminal, f"    {api.url}; alert e-mails go to {home / 'mail'}")
            for spec in runs:
                _say(terminal, f"==> running {spec.dag_id}")
                started = time.monotonic()
                dag_run, reviewer = run_workflow(api, spec, folder)
                for line in [*step_lines(dag_run), *summarize(spec, dag_run, reviewer)]:
                    _say(terminal, line)
                _say(terminal, f"  took {time.monotonic() - started:.0f} s")
                ok = ok and dag_run.state == "success"
            _say(terminal, f"=== alerts e-mailed to a person: {len(mails)} (in {home / 'mail'})")
            for subject in mails:
                _say(terminal, f"  {subject}")
    print("\nLook up any item:  .venv/bin/conveyor items --workflow supplier_exceptions --limit 5")
    print("                   .venv/bin/conveyor status <item id>;  .venv/bin/conveyor queue")
    print("Open the UI:       .venv/bin/conveyor ui   (or ./scripts/quickstart --serve next time)")
    print(describe_logins(f"http://127.0.0.1:{DEFAULT_PORT}", users, home))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
