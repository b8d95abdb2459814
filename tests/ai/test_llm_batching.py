"""Several items per LLM request (``items_per_call``) against the real OpenAI-compatible server."""

from __future__ import annotations

import math

import pytest

from conveyor.ai.errors import AIStepFailed
from conveyor.ai.runner import run_step
from tests.ai.llm_server import LLMServer
from tests.ai.seeding import exception_rows, seed_exceptions
from tests.ai.test_llm_step import config, item


def test_items_share_a_request_and_each_keeps_its_own_answer_and_confidence(ledger, llm: LLMServer):
    rows = exception_rows(12)
    seed_exceptions(ledger, "r1", rows)
    llm.configure(rules=[{"match": rows[2]["exception_id"], "label_logprob": -1.2}])

    summary = run_step(ledger, config("r1", items_per_call=4))

    assert summary["calls"] == 3 == llm.stats()["calls"]  # 12 items, 4 per request
    assert summary["items"] == 12 and summary["review_reasons"]["low_confidence"] == 1
    unsure = item(ledger, rows[2]["exception_id"])
    assert unsure.status == "pending_review"
    assert unsure.confidence == pytest.approx(math.exp(-1.2), abs=1e-3)
    for n in (1, 3):  # its neighbours in the same request stay sure
        sure = item(ledger, rows[n]["exception_id"])
        assert sure.status == "ai_processed" and sure.confidence == pytest.approx(math.exp(-0.02), abs=1e-3)
        # each answer was made from its own item, not from a neighbour's
        assert rows[n]["po_number"] in sure.ai_result["draft"]
        assert rows[2]["po_number"] not in sure.ai_result["draft"]
    prompt = llm.stats()["prompts"][0]
    assert prompt.count("### Item ") == 4 and prompt.startswith("### Item 1\n")


def test_an_item_left_out_or_answered_wrongly_is_asked_again_on_its_own(ledger, llm: LLMServer):
    rows = exception_rows(8)
    seed_exceptions(ledger, "r1", rows)
    skipped, invalid = rows[1]["exception_id"], rows[5]["exception_id"]
    llm.configure(
        rules=[{"match": skipped, "kind": "skip", "times": 1}, {"match": invalid, "kind": "invalid", "times": 1}]
    )

    summary = run_step(ledger, config("r1", items_per_call=4))

    assert summary["calls"] == 4 == llm.stats()["calls"]  # two batches, then one single request each
    assert llm.calls_for(skipped) == 2 and llm.calls_for(invalid) == 2
    assert llm.calls_for(rows[0]["exception_id"]) == 1
    assert summary["failed"] == 0 and summary["passed"] + summary["review"] == 8
    for key in (skipped, invalid):
        answered = item(ledger, key)
        assert answered.status == "ai_processed" and answered.ai_result["category"]


def test_a_malformed_batch_is_repaired_then_split_so_one_bad_item_holds_up_no_other(ledger, llm: LLMServer):
    rows = exception_rows(4)
    seed_exceptions(ledger, "r1", rows)
    bad = rows[0]["exception_id"]
    llm.configure(rules=[{"match": bad, "kind": "malformed"}])

    summary = run_step(ledger, config("r1", items_per_call=4, max_failure_rate=0.3))

    # the batch and its repair (both malformed), then 4 single requests, the bad one repaired once
    assert llm.stats()["calls"] == summary["calls"] == 2 + 4 + 1
    assert summary["failure_reasons"] == {"invalid_output": 1}
    failed = item(ledger, bad)
    assert failed.status == "pending_review"
    assert failed.reason.startswith("model error: model output did not match the ExceptionClassification schema")
    for row in rows[1:]:
        assert item(ledger, row["exception_id"]).status == "ai_processed"


def test_a_batch_the_endpoint_keeps_failing_waits_for_the_task_retry_without_single_requests(ledger, llm: LLMServer):
    rows = exception_rows(3)
    seed_exceptions(ledger, "r1", rows)
    llm.configure(fail_all="500")

    with pytest.raises(AIStepFailed) as failed:
        run_step(ledger, config("r1", items_per_call=3))

    assert llm.stats()["calls"] == 3  # one batch x max_attempts 3; no fan-out to single requests
    assert failed.value.retryable is True
    assert "3 unavailable:http_500" in str(failed.value)
    assert ledger.count_by_status(workflow="supplier_exceptions", run_id="r1") == {"validated": 3}

    llm.configure(reset=True)
    summary = run_step(ledger, config("r1", items_per_call=3))
    assert summary["passed"] == 3 and llm.stats()["calls"] == 1


def test_each_item_of_a_batch_is_cached_under_its_own_input(ledger, llm: LLMServer):
    from conveyor.ai.cache import ResultCache
    from conveyor.ai.definitions import ItemView
    from conveyor_examples.supplier_exceptions import CLASSIFY_EXCEPTION

    rows = exception_rows(6)
    seed_exceptions(ledger, "r1", rows)
    summary = run_step(ledger, config("r1", items_per_call=3))
    assert llm.stats()["calls"] == summary["calls"] == 2

    # What a single-item request of a later run looks up: (model, prompt version, input hash).
    hashes = {
        row["exception_id"]: CLASSIFY_EXCEPTION.model_input(ItemView(row["exception_id"], dict(row)))[1] for row in rows
    }
    cached = ResultCache(ledger).get_many(summary["model"], CLASSIFY_EXCEPTION.version, list(hashes.values()))
    assert len(cached) == 6
    for key, digest in hashes.items():
        assert cached[digest].output["category"] == item(ledger, key).ai_result["category"]
        assert cached[digest].detail["batched"] == 3

    llm.configure(reset=True)
    assert run_step(ledger, config("r1", items_per_call=3))["items"] == 0 and llm.stats()["calls"] == 0


def test_agreement_is_counted_item_by_item_across_samples_of_the_batch(ledger, llm: LLMServer):
    rows = exception_rows(4)
    seed_exceptions(ledger, "r1", rows)
    torn = rows[1]["exception_id"]
    llm.configure(rules=[{"match": torn, "alternate": ["quality", "other"]}])

    summary = run_step(ledger, config("r1", items_per_call=4, confidence_method="agreement", samples=3))

    assert llm.stats()["calls"] == summary["calls"] == 3  # k samples of one request
    doubtful = item(ledger, torn)
    assert doubtful.status == "pending_review" and doubtful.confidence == pytest.approx(2 / 3, abs=1e-3)
    assert doubtful.ai_result["category"] == "quality"
    for row in rows[2:]:
        unanimous = item(ledger, row["exception_id"])
        assert unanimous.status == "ai_processed" and unanimous.confidence == 1.0

