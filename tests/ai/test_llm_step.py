"""The AI step against a real OpenAI-compatible HTTP server: confidence, retries, faults, cache, fallback."""

from __future__ import annotations

import json
import math
import time

import pytest

from conveyor.ai.definitions import AITask
from conveyor.ai.errors import AIStepFailed
from conveyor.ai.retries import RetryPolicy
from conveyor.ai.runner import StepConfig, run_step
from conveyor_examples.invoices import EXTRACT_FIELDS as EXTRACT_INVOICE_FIELDS
from conveyor_examples.supplier_exceptions import CLASSIFY_EXCEPTION
from tests.ai.conftest import BACKUP_CONN, PRIMARY_CONN
from tests.ai.seeding import INBOX, SUPPLIER_CATEGORIES, exception_rows, invoice_payload, seed, seed_exceptions

FAST_RETRY = RetryPolicy(max_attempts=3, backoff_base=0.05, backoff_max=0.2, max_retry_after=5)


def config(run_id: str, task: AITask = CLASSIFY_EXCEPTION, **overrides) -> StepConfig:
    settings = dict(
        model=PRIMARY_CONN,
        retry=FAST_RETRY,
        call_timeout=2.0,
        max_concurrency=4,
        breaker_threshold=50,
        breaker_cooldown=30.0,
        breaker_poll_interval=0.2,
    )
    settings.update(overrides)
    return StepConfig.of(workflow=task.workflow, run_id=run_id, task=task, actor="ai_tests.llm#1", **settings)


def item(ledger, key: str):
    return ledger.get(f"supplier_exceptions:{key}")


def test_structured_answers_with_label_logprob_confidence(ledger, llm):
    rows = exception_rows(12)
    seed_exceptions(ledger, "r1", rows)
    # The model hesitates on one label: p = exp(-1.2) = 0.30.
    llm.configure(rules=[{"match": rows[2]["exception_id"], "label_logprob": -1.2}])

    summary = run_step(ledger, config("r1"))

    assert summary["calls"] == 12 == llm.stats()["calls"]
    assert summary["model"] == f"llm:openai:fake-model@{llm.base_url}"
    unsure = item(ledger, rows[2]["exception_id"])
    assert unsure.status == "pending_review"
    assert unsure.confidence == pytest.approx(math.exp(-1.2), abs=1e-3)
    assert unsure.reason.startswith("confidence 0.30 is below the threshold 0.70 (category '")
    sure = item(ledger, rows[3]["exception_id"])  # the label's tokens were near-certain: p = exp(-0.02)
    assert sure.status == "ai_processed" and sure.confidence == pytest.approx(math.exp(-0.02), abs=1e-3)
    assert sure.ai_result["category"] in SUPPLIER_CATEGORIES
    assert rows[3]["po_number"] in sure.ai_result["draft"]
    prompt = llm.stats()["prompts"][0]
    assert "po_number: PO-" in prompt and "notes:" in prompt


# -- retries -----------------------------------------------------------------------------------


def test_transient_errors_are_retried_with_backoff_until_the_call_passes(ledger, llm):
    rows = exception_rows(1)
    seed_exceptions(ledger, "r1", rows)
    llm.configure(faults=[{"kind": "500"}, {"kind": "503"}])

    summary = run_step(ledger, config("r1"))

    stats = llm.stats()
    assert stats["calls"] == summary["calls"] == 3
    assert stats["kinds"] == {"500": 1, "503": 1, "ok": 1}
    assert item(ledger, rows[0]["exception_id"]).status == "ai_processed"


def test_retries_stop_at_their_limit_and_the_items_wait_for_the_task_retry(ledger, llm):
    rows = exception_rows(3)
    seed_exceptions(ledger, "r1", rows)
    llm.configure(fail_all="500")

    with pytest.raises(AIStepFailed) as failed:
        run_step(ledger, config("r1", max_concurrency=1))

    assert llm.stats()["calls"] == 9  # 3 items x max_attempts 3, not one more
    assert failed.value.retryable is True
    assert str(failed.value).startswith(
        "3 of 3 item(s) failed (100%, above max_failure_rate 10%): 3 unavailable:http_500;"
    )
    assert "stay in 'validated' for the retry" in str(failed.value)
    assert ledger.count_by_status(workflow="supplier_exceptions", run_id="r1") == {"validated": 3}

    llm.configure(reset=True)  # the service recovers; Airflow's retry resumes
    summary = run_step(ledger, config("r1"))
    assert summary["items"] == 3 and llm.stats()["calls"] == 3


def test_a_few_items_that_keep_failing_are_tolerated_and_go_to_review(ledger, llm):
    rows = exception_rows(10)
    seed_exceptions(ledger, "r1", rows)
    broken = rows[4]["exception_id"]
    llm.configure(rules=[{"match": broken, "kind": "502"}])

    summary = run_step(ledger, config("r1", max_failure_rate=0.2))

    assert summary["failure_reasons"] == {"unavailable:http_502": 1}
    assert llm.calls_for(broken) == 3
    failed = item(ledger, broken)
    assert failed.status == "pending_review" and failed.review_target == "ai_processed"
    assert failed.reason.startswith(
        "model error: model call failed after 3 attempt(s): HTTP 502 from fake-model"
    )
    assert failed.last_error.startswith("model call failed after 3 attempt(s)")


def test_retry_after_is_honoured_and_a_too_long_one_ends_the_retries(ledger, llm):
    rows = exception_rows(2)
    seed_exceptions(ledger, "r1", rows)
    first, second = rows[0]["exception_id"], rows[1]["exception_id"]
    llm.configure(
        faults=[{"kind": "429", "retry_after": 1}],
        rules=[{"match": second, "kind": "429", "retry_after": 30}],
    )

    summary = run_step(ledger, config("r1", max_concurrency=1, max_failure_rate=0.5))

    stats = llm.stats()
    arrivals = [t for t, p in zip(stats["arrivals"], stats["prompts"], strict=True) if first in p]
    assert len(arrivals) == 2
    assert 1.0 <= arrivals[1] - arrivals[0] < 1.6  # waited what the server asked (+ <=10% jitter), not 0.05 s
    assert llm.calls_for(second) == 1  # asked for 30 s > max_retry_after 5 s: no second attempt
    assert item(ledger, first).status == "ai_processed"
    assert item(ledger, second).status == "pending_review"
    assert "HTTP 429" in item(ledger, second).reason
    assert summary["failure_reasons"] == {"unavailable:http_429": 1}


def test_a_call_that_hangs_past_the_timeout_is_cut_and_retried(ledger, llm):
    rows = exception_rows(1)
    seed_exceptions(ledger, "r1", rows)
    llm.configure(faults=[{"kind": "hang", "seconds": 20}])

    started = time.monotonic()
    run_step(ledger, config("r1", call_timeout=0.5))

    assert time.monotonic() - started < 8
    assert llm.stats()["calls"] == 2
    assert item(ledger, rows[0]["exception_id"]).status == "ai_processed"


# -- permanent errors --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["malformed", "wrong_schema"])
def test_output_that_never_matches_the_schema_goes_to_review_after_one_repair(ledger, llm, kind):
    rows = exception_rows(5)
    seed_exceptions(ledger, "r1", rows)
    bad = rows[1]["exception_id"]
    llm.configure(rules=[{"match": bad, "kind": kind}])

    summary = run_step(ledger, config("r1", max_failure_rate=0.25))

    assert llm.calls_for(bad) == 2  # the answer and one repair, never retried as if transient
    failed = item(ledger, bad)
    assert failed.status == "pending_review"
    assert failed.reason.startswith(
        "model error: model output did not match the ExceptionClassification schema "
        "after 1 repair attempt(s): "
    )
    assert "answer was '" in failed.reason
    assert summary["failure_reasons"] == {"invalid_output": 1}
    assert summary["passed"] + summary["review"] == 5


def test_a_repair_request_carries_the_validation_errors_and_can_succeed(ledger, llm):
    rows = exception_rows(1)
    seed_exceptions(ledger, "r1", rows)
    llm.configure(faults=[{"kind": "wrong_schema"}])

    run_step(ledger, config("r1"))

    prompts = llm.stats()["prompts"]
    assert len(prompts) == 2
    assert "category" in prompts[1] and "Field required" in prompts[1]  # the repair turn names what was wrong
    assert item(ledger, rows[0]["exception_id"]).status == "ai_processed"


def test_a_rejected_request_is_not_retried(ledger, llm):
    rows = exception_rows(4)
    seed_exceptions(ledger, "r1", rows)
    bad = rows[0]["exception_id"]
    llm.configure(rules=[{"match": bad, "kind": "400"}])

    run_step(ledger, config("r1", max_failure_rate=0.25))

    assert llm.calls_for(bad) == 1
    rejected = item(ledger, bad)
    assert rejected.status == "pending_review"
    assert rejected.reason == (
        "model error: model call failed: HTTP 400 from fake-model: Invalid request: unsupported parameter"
    )


# -- the result cache --------------------------------------------------------------------------


def _forget_items(ledger) -> None:
    """Drop the items but keep the cache: the same inputs come back (a replayed run)."""
    with ledger.connect() as conn:
        conn.execute("DELETE FROM conveyor.transitions")
        conn.execute("DELETE FROM conveyor.items")


def test_the_cache_answers_a_second_run_with_zero_calls_until_prompt_or_input_change(ledger, llm):
    rows = exception_rows(10)
    seed_exceptions(ledger, "r1", rows)
    first = run_step(ledger, config("r1"))
    assert first["calls"] == 10 and first["cache_hits"] == 0
    before = {i.item_id: (i.status, i.ai_result, i.confidence) for i in ledger.items(limit=None)}

    _forget_items(ledger)
    seed_exceptions(ledger, "r2", rows)
    second = run_step(ledger, config("r2"))

    assert second["calls"] == 0 and second["cache_hits"] == 10
    assert llm.stats()["calls"] == 10  # nothing reached the server the second time
    assert {i.item_id: (i.status, i.ai_result, i.confidence) for i in ledger.items(limit=None)} == before

    # An edited input is a new key; so is a new prompt version.
    _forget_items(ledger)
    changed = [{**rows[0], "notes": rows[0]["notes"] + " (updated by the clerk)"}, *rows[1:]]
    seed_exceptions(ledger, "r3", changed)
    assert run_step(ledger, config("r3"))["calls"] == 1

    _forget_items(ledger)
    seed_exceptions(ledger, "r4", rows)
    v2 = AITask(**{**CLASSIFY_EXCEPTION.__dict__, "prompt_version": "v2"})
    assert run_step(ledger, config("r4", task=v2))["calls"] == 10
    assert llm.stats()["calls"] == 21


def test_identical_inputs_in_one_chunk_are_sent_once(ledger, llm):
    row = exception_rows(1)[0]
    seed(ledger, "supplier_exceptions", "r1", [(f"DUP-{n}", row) for n in range(5)])

    summary = run_step(ledger, config("r1"))

    assert llm.stats()["calls"] == 1 == summary["calls"]
    assert summary["items"] == 5


# -- breaker and fallback ----------------------------------------------------------------------


def test_the_fallback_answers_while_the_primary_breaker_is_open(ledger, llm):
    rows = exception_rows(8)
    seed_exceptions(ledger, "r1", rows)
    llm.configure(rules=[{"model": "fake-model", "kind": "500"}])

    summary = run_step(
        ledger, config("r1", fallback_model=BACKUP_CONN, breaker_threshold=2, max_concurrency=1)
    )

    stats = llm.stats()
    assert stats["kinds"]["500"] == 2  # two failures opened the primary's breaker; no third call
    assert summary["fallback_used"] == 8 and summary["items"] == 8
    assert summary["fallback_model"] == f"llm:openai:backup-model@{llm.base_url}"
    done = item(ledger, rows[5]["exception_id"])
    assert f"via fallback llm:openai:backup-model@{llm.base_url}" in done.reason
    with ledger.connect() as conn:
        state = conn.execute(
            "SELECT state, failures FROM conveyor.ai_breakers WHERE endpoint LIKE 'openai:fake-model@%'"
        )
        assert state.fetchone() == ("open", 2)


def test_the_embedded_model_can_be_the_fallback(ledger, llm):
    rows = exception_rows(20)
    seed_exceptions(ledger, "r1", rows)
    llm.configure(fail_all="503")

    summary = run_step(ledger, config("r1", fallback_model="local", breaker_threshold=3, max_concurrency=1))

    assert llm.stats()["calls"] == 3
    assert summary["fallback_used"] == 20
    assert summary["fallback_model"].startswith("local:supplier_exception_notes@")
    counts = ledger.count_by_status(workflow="supplier_exceptions", run_id="r1")
    assert counts.get("validated") is None and sum(counts.values()) == 20


def test_without_a_fallback_an_open_breaker_stops_the_step_with_a_clear_message(ledger, llm):
    rows = exception_rows(6)
    seed_exceptions(ledger, "r1", rows)
    llm.configure(fail_all="500")

    with pytest.raises(AIStepFailed) as failed:
        run_step(ledger, config("r1", breaker_threshold=2, max_concurrency=1, batch_size=2))

    message = str(failed.value)
    assert message.startswith(
        f"circuit breaker open for model endpoint 'openai:fake-model@{llm.base_url}' since "
    )
    assert "after 2 consecutive failures; it half-opens at " in message
    assert "No fallback model is declared" in message and "6 item(s) stay in 'validated'" in message
    assert failed.value.retryable is True
    assert llm.stats()["calls"] == 2
    assert ledger.count_by_status(workflow="supplier_exceptions", run_id="r1") == {"validated": 6}


# -- confidence methods ------------------------------------------------------------------------


def test_agreement_across_samples_is_the_confidence(ledger, llm):
    rows = exception_rows(4)
    seed_exceptions(ledger, "r1", rows)
    torn = rows[1]["exception_id"]
    llm.configure(rules=[{"match": torn, "alternate": ["quality", "other"]}])

    summary = run_step(ledger, config("r1", confidence_method="agreement", samples=3))

    assert summary["calls"] == 12  # k = 3 samples per item: the method's cost
    doubtful = item(ledger, torn)
    assert doubtful.confidence == pytest.approx(2 / 3, abs=1e-3)
    assert doubtful.ai_result["category"] == "quality"
    assert doubtful.status == "pending_review"
    assert doubtful.reason.startswith("confidence 0.67 is below the threshold 0.70 (category 'quality')")
    unanimous = [i for i in ledger.items(limit=None) if i.item_id != doubtful.item_id]
    assert {i.confidence for i in unanimous} == {1.0}


def test_without_any_confidence_every_answer_waits_for_a_person(ledger, llm):
    seed_exceptions(ledger, "r1", exception_rows(3))

    summary = run_step(ledger, config("r1", confidence_method="none"))

    assert summary["review_reasons"]["no_confidence"] == 3
    reason = ledger.items(limit=1)[0].reason
    assert reason.startswith("the model reported no confidence (category '") and "threshold is 0.70" in reason


def test_invoice_fields_extracted_by_an_llm(ledger, llm):
    document = INBOX / "INV-1001-2026-03283.txt"
    seed(ledger, "invoice_processing", "r1", [(document.stem, invoice_payload(document))], status="received")
    fields = {
        "vendor": "Acme Office Supplies GmbH",
        "vendor_id": "V-1001",
        "invoice_number": "INV-1001-2026-03283",
        "invoice_date": "2026-11-26",
        "due_date": "2027-01-10",
        "currency": "EUR",
        "line_items": [
            {"description": "Toner cartridge", "quantity": 3, "unit_price": 89.9, "amount": 269.7}
        ],
        "total": 632.8,
    }
    llm.configure(rules=[{"match": "INV-1001-2026-03283", "kind": "output", "output": fields}])

    run_step(ledger, config("r1", task=EXTRACT_INVOICE_FIELDS, min_confidence=0.5))

    extracted = ledger.get(f"invoice_processing:{document.stem}")
    assert extracted.status == "extracted"
    assert extracted.ai_result["invoice_number"] == "INV-1001-2026-03283"
    assert extracted.ai_result["line_items"][0]["unit_price"] == 89.9
    assert 0.99 < extracted.confidence <= 1.0  # geometric mean token probability of the answer
    assert "Line items:" in llm.stats()["prompts"][0]  # the document itself was sent


def test_in_one_worker_the_half_open_probe_goes_alone_and_the_others_follow_it(ledger, llm):
    import asyncio

    from conveyor.ai.breaker import CircuitBreaker

    rows = exception_rows(6)
    seed_exceptions(ledger, "r1", rows)
    breaker = CircuitBreaker(ledger, f"openai:fake-model@{llm.base_url}", threshold=2, cooldown=0.5)
    for _ in range(2):
        asyncio.run(breaker.record_failure("HTTP 503 earlier today"))
    breaker.close()
    time.sleep(0.6)  # the cool-down is over: the next call is the probe
    llm.configure(latency=0.3)

    summary = run_step(ledger, config("r1", breaker_threshold=2, breaker_cooldown=0.5, max_concurrency=4))

    arrivals = llm.stats()["arrivals"]
    assert len(arrivals) == 6 and summary["passed"] + summary["review"] == 6
    assert min(arrivals[1:]) - arrivals[0] >= 0.25  # nobody else called while the probe was out
    with ledger.connect() as conn:
        row = conn.execute(
            "SELECT state, failures FROM conveyor.ai_breakers WHERE endpoint LIKE 'openai:fake%'"
        )
        assert row.fetchone() == ("closed", 0)


@pytest.mark.parametrize("items_per_call", [1, 3])
def test_the_responses_api_gives_the_same_answers_and_confidences(ledger, llm, monkeypatch, items_per_call):
    # The same endpoint through pydantic-ai's Responses API model: logprobs come on each text part.
    monkeypatch.setenv(
        "AIRFLOW_CONN_LLM_RESPONSES",
        json.dumps(
            {
                "conn_type": "pydanticai",
                "host": llm.base_url,
                "password": "sk-test-key-123",
                "extra": {"model": "openai-responses:fake-model"},
            }
        ),
    )
    rows = exception_rows(6)
    seed_exceptions(ledger, "r1", rows)
    llm.configure(rules=[{"match": rows[4]["exception_id"], "label_logprob": -1.2}])

    summary = run_step(ledger, config("r1", model="llm_responses", items_per_call=items_per_call))

    assert summary["calls"] == llm.stats()["calls"] == 6 // items_per_call
    assert llm.stats()["endpoints"] == {"responses": 6 // items_per_call}
    unsure = item(ledger, rows[4]["exception_id"])
    assert unsure.status == "pending_review"
    assert unsure.confidence == pytest.approx(math.exp(-1.2), abs=1e-3)
    sure = item(ledger, rows[5]["exception_id"])
    assert sure.confidence == pytest.approx(math.exp(-0.02), abs=1e-3)
    assert rows[5]["po_number"] in sure.ai_result["draft"]


def test_an_answer_jsonb_cannot_store_goes_to_review_with_the_reason(ledger, llm):
    rows = exception_rows(4)
    seed_exceptions(ledger, "r1", rows)
    bad = rows[1]["exception_id"]
    answer = {"category": "quality", "draft": "Scratched\u0000 parts."}  # a NUL byte in the model's text
    llm.configure(rules=[{"match": bad, "kind": "output", "output": answer}])

    summary = run_step(ledger, config("r1", max_failure_rate=0.5))

    held = item(ledger, bad)
    assert held.status == "pending_review"
    assert held.reason == "model output cannot be stored: field 'draft' contains a NUL byte"
    assert summary["failure_reasons"] == {"invalid_output": 1}
    assert [item(ledger, r["exception_id"]).status for r in rows].count("ai_processed") == 3
