"""What a report template sees: ``count``, and whose answer each item carries (the model's or a person's)."""

from __future__ import annotations

from conveyor import PublishOperator
from conveyor.review.review_queue import ReviewQueue
from tests.review.conftest import route_to_review

WF = "supplier_exceptions"


def test_the_template_context_tells_a_persons_answer_from_the_models(ledger):
    route_to_review(ledger, WF, "run-1", pending=["A", "B"], quarantined=["Q"], validated=["C"])
    queue = ReviewQueue(ledger)
    queue.decide(f"{WF}:A", "approve", reviewer="ann", comment="fine as drafted")
    queue.decide(f"{WF}:Q", "correct", reviewer="bob", changes={"amount": 120})
    queue.decide(f"{WF}:B", "reject", reviewer="ann", comment="not ours")

    step = PublishOperator(task_id="publish", workflow=WF, templates=["x.md.j2"])
    items = ledger.items(workflow=WF, run_id="run-1", limit=None)
    values = step.template_context(items, {"run_id": "run-1"}, ledger.review_decisions(WF, "run-1"))

    assert values["count"] == len(values["items"]) == 4
    by_key = {i["business_key"]: i for i in values["items"]}
    assert (by_key["C"]["reviewed_by"], by_key["C"]["corrected"], by_key["C"]["model_answer"]) == (None, [], None)
    assert (by_key["A"]["reviewed_by"], by_key["A"]["corrected"]) == ("ann", [])
    assert by_key["Q"]["reviewed_by"] == "bob"
    assert by_key["Q"]["corrected"] == [{"field": "amount", "before": 100, "after": 120}]
    assert ledger.review_decisions(WF, "run-1")[f"{WF}:B"].to_status == "rejected"
    assert ledger.review_decisions(WF, "run-2") == {}
