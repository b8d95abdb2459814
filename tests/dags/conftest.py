"""Running the bundled DAGs end to end: real DAG runs, a real API server for the director's
sign-off and the review API, a real SMTP server receiving the alerts, and people played by the
same scripted reviewer the quickstart uses."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from conveyor.quickstart.api_server import ApiServer
from conveyor.quickstart.dag_test import manual_run_id, run_dag_test
from conveyor.quickstart.run import ScriptedReviewer, WorkflowRun, load_dag
from tests.support.api import USERS

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Mailbox:
    subjects: list[str] = field(default_factory=list)
    bodies: list[str] = field(default_factory=list)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802 - aiosmtpd hook
        from email import message_from_bytes, policy

        message = message_from_bytes(envelope.original_content or envelope.content, policy=policy.default)
        self.subjects.append(str(message["Subject"]))
        body = message.get_body(preferencelist=("html", "plain"))
        self.bodies.append(body.get_content() if body is not None else "")
        return "250 OK"


@pytest.fixture
def mailbox(monkeypatch) -> Iterator[Mailbox]:
    """A real SMTP server on 127.0.0.1, configured as the alert route (connection + Variable)."""
    from aiosmtpd.controller import Controller

    from conveyor.quickstart.api_server import free_port

    box = Mailbox()
    port = free_port()
    controller = Controller(box, hostname="127.0.0.1", port=port)
    controller.start()
    monkeypatch.setenv("AIRFLOW_CONN_CONVEYOR_SMTP", json.dumps({
        "conn_type": "smtp", "host": "127.0.0.1", "port": port,
        "extra": {"disable_ssl": True, "disable_tls": True, "from_email": "conveyor@test", "retry_limit": 1},
    }))
    monkeypatch.setenv("AIRFLOW_VAR_CONVEYOR_ALERT_EMAIL", "ops@test")
    try:
        yield box
    finally:
        controller.stop()


class _Users:
    """Adapts the session's API server to the reviewer's users (reviewer, director)."""

    def __init__(self, server: ApiServer) -> None:
        self.server = server

    def client(self, user: str | None = None):  # type: ignore[no-untyped-def]
        return self.server.client({"reviewer": "rita", "director": "admin"}.get(user or "", user))


@dataclass
class Runner:
    api: ApiServer

    def run(self, dag_id: str, conf: dict[str, Any], *, people: bool = True, reviewers: bool = True,
            when: datetime | None = None,
            adjust: dict[str, dict[str, Any]] | None = None,
            policy: Any = None, signoff: str = "Approve",
            signoff_reason: str | None = None) -> tuple[Any, ScriptedReviewer]:
        """One run of a bundled DAG; ``people`` answers sign-offs and (unless ``reviewers`` is False)
        the review queue; ``adjust`` sets task attributes for this run (e.g. a short review timeout);
        ``policy`` decides for the reviewer (default: the quickstart's); ``signoff`` is the
        director's answer."""

        dag = load_dag(dag_id, REPO / "dags")
        for task_id, attributes in (adjust or {}).items():
            for name, value in attributes.items():
                setattr(dag.get_task(task_id), name, value)
        for task in dag.tasks:
            task.retries = 0  # a failure shows at once instead of after the retry delays
            if task.task_type == "HumanReviewSensor":
                task.poke_interval = 1
        when = when or datetime.now(UTC).replace(microsecond=0)
        run_id = manual_run_id(when)
        reviewed = dag_id if reviewers and dag_id != "workflow_health" else None
        spec = WorkflowRun(dag_id, reviewed, conf, signoff=signoff, signoff_reason=signoff_reason)
        if policy is not None:
            spec.policy = policy
        reviewer = ScriptedReviewer(_Users(self.api), spec, run_id, interval=0.5)  # type: ignore[arg-type]
        if people:
            reviewer.start()
        try:
            dag_run = run_dag_test(dag, when, conf)
        finally:
            if people:
                reviewer.stop()
        return dag_run, reviewer


@pytest.fixture
def runner(api_server: ApiServer, ledger) -> Runner:
    return Runner(api_server)


def task_states(dag_run: Any) -> dict[str, str]:
    return {ti.task_id: str(ti.state) for ti in dag_run.get_task_instances()}


__all__ = ["USERS", "Runner", "task_states"]
