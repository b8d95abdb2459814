"""``conveyor accuracy`` on what a real AI step and real decisions recorded in the ledger."""

from __future__ import annotations

import json

from conveyor.ai.runner import StepConfig, run_step
from conveyor.review.review_queue import ReviewQueue
from conveyor_examples.supplier_exceptions import CLASSIFY_EXCEPTION
from tests.ai.seeding import exception_rows, seed_exceptions
from tests.cli.test_cli import WF, run


def test_accuracy_reports_the_spot_checks_estimate_and_the_curve(ledger, ledger_dsn):
    seed_exceptions(ledger, "r1", exception_rows(120))
    ledger.declare_ai_task(WF, "ai_processed", CLASSIFY_EXCEPTION.declaration(), actor="t#1")
    run_step(ledger, StepConfig.of(workflow=WF, run_id="r1", task=CLASSIFY_EXCEPTION, actor="t.classify#1",
                                spot_check=0.4, max_error_rate=0.3))  # fmt: skip
    queue = ReviewQueue(ledger)
    waiting = ledger.items(workflow=WF, run_id="r1", status="pending_review", limit=None)
    spots = [i for i in waiting if "checked at random" in i.reason]
    wrong = spots[::4]  # the reviewer finds every fourth spot check wrong
    for item in wrong:
        other = "documentation" if item.ai_result["category"] != "documentation" else "other"
        queue.decide(item.item_id, "correct", reviewer="ann", changes={"category": other})
    queue.decide_many([i.item_id for i in waiting if i not in wrong], "approve", reviewer="ann")

    result = run("accuracy", "--workflow", WF, "--json", dsn=ledger_dsn)
    assert result.returncode == 0, result.stderr
    [step] = json.loads(result.stdout)["steps"]
    assert step["step"] == "classify_exception" and step["spot_checked"] == len(spots)
    assert step["spot_wrong"] == len(wrong)
    assert step["passed_error_rate"] == len(wrong) / len(spots)
    assert step["passed_error_lower"] < step["passed_error_rate"] < step["passed_error_upper"] < 1
    assert step["exception_rate"] == step["exceptions"] / step["answers"] and step["max_error_rate"] == 0.3
    curve = {p["min_confidence"]: p for p in step["curve"]}
    assert curve[0.7]["review_share"] == step["exception_rate"]  # the step's own threshold: what it did
    assert curve[0.0]["review_share"] <= curve[0.5]["review_share"] <= curve[0.9]["review_share"]
    if step["recommended_min_confidence"] is not None:
        assert curve[step["recommended_min_confidence"]]["passed_error_upper"] <= 0.3
    assert step["previous"]["spot_checked"] == 0

    text = run("accuracy", "--workflow", WF, "--step", "classify_exception", dsn=ledger_dsn)
    assert text.returncode == 0, text.stderr
    assert "(95% upper bound" in text.stdout and "MIN_CONFIDENCE" in text.stdout
    assert "recommended        none: no threshold's upper bound is under the target" in text.stdout or (
        "recommended        min_confidence=" in text.stdout
    )


def test_accuracy_refuses_an_unknown_workflow_or_step(ledger, ledger_dsn):
    typo = run("accuracy", "--workflow", "supplier_exception", dsn=ledger_dsn)
    assert typo.returncode == 3 and "did you mean supplier_exceptions?" in typo.stderr
    step = run("accuracy", "--workflow", WF, "--step", "classify", dsn=ledger_dsn)
    assert step.returncode == 3 and "no AI step 'classify'" in step.stderr
    assert run("accuracy", dsn=ledger_dsn).returncode == 2  # --workflow is required
