"""The people of the demo: a scripted reviewer and director, working through the HTTP APIs.

While a run waits, :class:`ScriptedReviewer` works the review queue through Conveyor's review
API (as a reviewer in the UI would) and answers the director's sign-off through Airflow's own
human-in-the-loop API. The tests use it too, so the demo's people and the tests' are the same.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from conveyor.quickstart.api_server import ApiServer

#: item (as the review API returns it) -> (action, comment), or (action, comment, changes) to correct
#: item -> (action, comment[, changes]), or None to leave the item for a later pass
Policy = Callable[[dict[str, Any]], tuple[str, str] | tuple[str, str, dict[str, Any]] | None]


#: The words the AI step's reason starts a spot check with (``conveyor.ai.spot_checks.spot_reason``).
SPOT_CHECK_MARK = "checked at random"


def is_spot_check(item: dict[str, Any]) -> bool:
    """Whether a queue item is a spot check: an answer that passed every check, sent at random."""
    return item.get("status") == "pending_review" and SPOT_CHECK_MARK in (item.get("reason") or "")


def reviewer_policy(item: dict[str, Any]) -> tuple[str, str]:
    """What the scripted reviewer decides: bad input is rejected, a spot check is checked and its
    answer stands (approve: it was right), doubtful AI output is checked and approved unless the
    model was close to guessing."""
    if item["status"] == "quarantined":
        return "reject", f"bad input, sent back to the feed owner: {item.get('reason') or 'see checks'}"
    if is_spot_check(item):
        return "approve", "spot check: checked against the source, the answer stands"
    confidence = item.get("confidence")
    if confidence is not None and confidence < 0.3:
        return "reject", f"model was guessing (confidence {confidence:.2f}); handled by hand"
    return "approve", "checked against the source"


@dataclass
class WorkflowRun:
    """One bundled workflow the demo runs: its DAG, the workflow it reviews, the run's conf."""

    dag_id: str
    workflow: str | None
    conf: dict[str, Any] = field(default_factory=dict)
    policy: Policy = reviewer_policy
    signoff: str = "Approve"
    #: the reason the director enters with the answer (None: none)
    signoff_reason: str | None = None


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
        #: answers "503: the ledger is unavailable": a person waits and tries again on the next pass
        self.unavailable = 0

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
        if page.status_code == 503:
            self.unavailable += 1
            return
        page.raise_for_status()
        for item in page.json()["items"]:
            decision = self.run_spec.policy(item)
            if decision is None:  # not now: look again on the next pass
                continue
            action, comment, *changes = decision
            body: dict[str, Any] = {"action": action, "comment": comment}
            if changes:
                body["changes"] = changes[0]
            response = client.post(f"/conveyor/api/review/items/{quote(item['item_id'], safe='')}/decision",
                                   json=body)
            if response.status_code == 200:
                self.decisions[action] = self.decisions.get(action, 0) + 1
            elif response.status_code == 503:  # the ledger is restarting: decide it on the next pass
                self.unavailable += 1
            elif response.status_code != 409:  # 409: decided meanwhile, fine
                response.raise_for_status()

    def _sign_off(self, client: Any) -> None:
        base = f"/api/v2/dags/{self.run_spec.dag_id}/dagRuns/{quote(self.run_id, safe='')}"
        details = client.get(f"{base}/hitlDetails")
        if details.status_code == 404:
            return
        details.raise_for_status()
        for detail in details.json().get("hitl_details", []):
            ti = detail["task_instance"]
            # Only a parked task takes an answer: Airflow 3.3 records an answer given while the task
            # is still running (the request is open a moment before it parks) but never resumes it.
            if detail.get("response_received") or ti.get("state") not in ("awaiting_input", "deferred"):
                continue
            answer: dict[str, Any] = {"chosen_options": [self.run_spec.signoff]}
            if self.run_spec.signoff_reason is not None:
                answer["params_input"] = {"reason": self.run_spec.signoff_reason}
            response = client.patch(
                f"{base}/taskInstances/{ti['task_id']}/{ti.get('map_index', -1)}/hitlDetails", json=answer
            )
            if response.status_code == 200:
                self.signoffs += 1
            elif response.status_code != 409:
                response.raise_for_status()
