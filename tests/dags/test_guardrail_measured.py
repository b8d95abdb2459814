"""The guardrail measured, end to end: a bundled workflow on an LLM over loopback, spot checks decided
by the scripted reviewer, the estimate read back with ``conveyor accuracy --json``, and a worse second
period alerted to a person by ``workflow_health`` through a real SMTP server.

The error is planted by the reviewer: in the first period it corrects every tenth spot check it
decides (10% of what passed is wrong), in the second every second one (the model got worse).
"""

from __future__ import annotations

import html
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from conveyor.quickstart import sample_feeds
from conveyor.quickstart.reviewer import is_spot_check, reviewer_policy
from tests.ai.conftest import PRIMARY_CONN, llm, llm_server_process  # noqa: F401 - fixtures
from tests.cli.test_cli import run as conveyor
from tests.dags.conftest import task_states

REPO = Path(__file__).resolve().parents[2]
WF = "inspection_notes"
# A larger share than the bundled 10%, so that one small delivery (57 notes) gives a real sample.
STEP = {"summarize": {"spot_check": 0.9, "max_error_rate": 0.25}}


class PlantedErrors:
    """The scripted reviewer, correcting every ``every``-th spot check it decides (the risk label)."""

    def __init__(self, every: int) -> None:
        self.every = every
        self.seen = 0

    def __call__(self, item: dict[str, Any]) -> Any:
        if not is_spot_check(item):
            return reviewer_policy(item)
        self.seen += 1
        if (self.seen - 1) % self.every:
            return "approve", "spot check: the risk label is right"
        risk = item["ai_result"]["risk"]
        return "correct", "spot check: wrong risk label", {"risk": "high" if risk != "high" else "low"}


def delivery(tmp_path: Path, number: int) -> Path:
    name, text = sample_feeds.csv_delivery(
        REPO / "include" / "data" / "inspection_notes" / "notes.csv", key="inspection_id",
        date_column="inspected_on", delivery=number, today=datetime.now(UTC).date(),
    )  # fmt: skip
    (tmp_path / name).write_text(text, encoding="utf-8")
    return tmp_path / name


def accuracy(dsn: str) -> dict[str, Any]:
    result = conveyor("accuracy", "--workflow", WF, "--step", "summarize", "--json", dsn=dsn)
    assert result.returncode == 0, result.stderr
    [step] = json.loads(result.stdout)["steps"]
    return step


def test_spot_checks_measure_what_passes_and_a_worse_period_reaches_a_person(
    runner, ledger, ledger_dsn, llm, mailbox, tmp_path, monkeypatch  # noqa: F811 - the llm fixture
):
    monkeypatch.setenv("CONVEYOR_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("AIRFLOW_VAR_CONVEYOR_INSPECTION_MODEL", PRIMARY_CONN)

    first, reviewer = runner.run(WF, {"extract_path": str(delivery(tmp_path, 1))}, adjust=STEP,
                                 policy=PlantedErrors(10))  # fmt: skip
    assert first.state == "success", task_states(first)
    assert llm.stats()["calls"] >= 50  # the answers came from the LLM over loopback
    now = accuracy(ledger_dsn)
    corrected = reviewer.decisions["correct"]
    assert now["spot_checked"] >= 40 and now["spot_wrong"] == corrected
    assert now["spot_checked"] == now["spot_checks_sent"]  # every spot check was decided
    # the planted rate (one in ten) lies within the estimate's 95% bounds
    assert now["passed_error_lower"] <= 0.10 <= now["passed_error_upper"] < 0.25
    assert abs(now["passed_error_rate"] - 0.10) < 0.03
    assert now["max_error_rate"] == 0.25 and now["exception_rate"] < 0.2

    # That was last week: the period before this one.
    with ledger.connect() as conn:  # test set-up: move the first run's records back in time
        conn.execute("UPDATE conveyor.ai_step_tallies SET at = at - interval '7 days'")
        conn.execute("UPDATE conveyor.ai_labels SET routed_at = routed_at - interval '7 days'")

    second, reviewer = runner.run(WF, {"extract_path": str(delivery(tmp_path, 2))}, adjust=STEP,
                                  policy=PlantedErrors(2))  # fmt: skip
    assert second.state == "success", task_states(second)
    worse = accuracy(ledger_dsn)
    assert worse["previous"]["spot_wrong"] == now["spot_wrong"]
    assert worse["passed_error_lower"] <= 0.5 <= worse["passed_error_upper"]
    assert worse["passed_error_upper"] > 0.25  # over the declared target

    health, _ = runner.run("workflow_health", {"workflows": [WF]}, people=False)
    assert health.state == "success", task_states(health)
    subjects = [s for s in mailbox.subjects if "summarize" in s]
    assert any("answers passing unreviewed are wrong up to" in s and "(target 25.0%)" in s for s in subjects), (
        mailbox.subjects
    )
    assert any("error of unreviewed answers rose to" in s for s in subjects), mailbox.subjects
    body = html.unescape(next(b for b in mailbox.bodies if "rose to" in b))
    assert f"{worse['spot_wrong']} of {worse['spot_checked']} spot checks wrong" in body
    assert "conveyor accuracy --workflow inspection_notes --step summarize" in body
    # a second evaluation of the same condition does not mail again (the alert path's dedupe)
    sent = len(mailbox.subjects)
    runner.run("workflow_health", {"workflows": [WF], "as_of": (datetime.now(UTC) + timedelta(minutes=5)).isoformat()},
               people=False)  # fmt: skip
    assert len(mailbox.subjects) == sent
