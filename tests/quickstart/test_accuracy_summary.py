"""The quickstart's summary prints the guardrail measured: the spot checks the scripted reviewer decided."""

from __future__ import annotations

from conveyor.ai.runner import StepConfig, run_step
from conveyor.quickstart.reviewer import is_spot_check, reviewer_policy
from conveyor.quickstart.run import accuracy_lines
from conveyor.review.api import ItemOut
from conveyor.review.review_queue import ReviewQueue
from conveyor_examples.supplier_exceptions import CLASSIFY_EXCEPTION
from tests.ai.seeding import exception_rows, seed_exceptions

WF = "supplier_exceptions"


def test_the_scripted_reviewer_decides_spot_checks_and_the_summary_prints_the_estimate(ledger):
    seed_exceptions(ledger, "r1", exception_rows(100))
    run_step(ledger, StepConfig.of(workflow=WF, run_id="r1", task=CLASSIFY_EXCEPTION, actor="t.classify#1",
                                spot_check=0.3, max_error_rate=0.05))  # fmt: skip
    queue = ReviewQueue(ledger)
    waiting = ledger.items(workflow=WF, run_id="r1", status="pending_review", limit=None)
    spots = [i for i in waiting if is_spot_check(ItemOut.of(i).model_dump())]
    assert spots and all(reviewer_policy(ItemOut.of(i).model_dump())[0] == "approve" for i in spots)
    queue.decide_many([i.item_id for i in spots], "approve", reviewer="scripted")

    [line] = accuracy_lines(ledger, WF)
    assert line.startswith(f"  classify_exception: {len(spots)} spot check(s) sent, {len(spots)} decided (0 wrong)")
    assert "error of what passed unreviewed 0.0%, 95% upper bound" in line and "(target 5.0%)" in line
    assert "conveyor accuracy --workflow supplier_exceptions" in line
