"""kill -9 of the task process mid-step, then Airflow's retry: nothing lost, nothing done twice."""

from __future__ import annotations

import time
from collections import Counter

import pytest

from tests.ai.conftest import PRIMARY_CONN
from tests.ai.seeding import exception_rows, seed_exceptions
from tests.ai.workers import Worker, preload

BATCH = 10
PARAMS = dict(model=PRIMARY_CONN, batch_size=BATCH, max_concurrency=2, call_timeout=20.0, min_confidence=0.5)


@pytest.mark.parametrize("per_call", [1, 5], ids=["one item per request", "five items per request"])
def test_a_killed_step_resumes_and_repeats_calls_only_for_the_chunk_in_flight(ledger, llm, per_call):
    preload()
    params = {**PARAMS, "items_per_call": per_call}
    requests_per_chunk = BATCH // per_call
    rows = sorted(exception_rows(60), key=lambda r: r["exception_id"])
    ids = seed_exceptions(ledger, "r1", rows)
    chunks = [[r["exception_id"] for r in rows[n : n + BATCH]] for n in range(0, 60, BATCH)]
    # The third chunk's first item takes long (once): the kill lands while that chunk is in flight,
    # its other nine items answered but not yet committed.
    llm.configure(latency=0.05, rules=[{"match": chunks[2][0], "latency": 15, "times": 1}])

    worker = Worker("r1", try_number=1, **params).start()
    deadline = time.monotonic() + 90
    def waiting() -> int:
        return len(ledger.item_ids(workflow="supplier_exceptions", run_id="r1", status="validated"))

    # Kill once the third chunk is sent and the first two are committed (commits run in a thread).
    while llm.stats()["calls"] < 3 * requests_per_chunk or waiting() > 60 - 2 * BATCH:
        assert time.monotonic() < deadline and worker.process.is_alive(), "the step never got going"
        time.sleep(0.02)
    worker.kill()
    assert worker.process.exitcode == -9
    left = ledger.item_ids(workflow="supplier_exceptions", run_id="r1", status="validated")
    assert len(left) == 60 - 2 * BATCH  # two chunks committed before the kill, the third was in flight

    outcome, summary = Worker("r1", try_number=2, **params).start().result()

    assert outcome == "success"
    assert summary["items"] == len(left)  # the retry saw only the unfinished items
    counts = ledger.count_by_status(workflow="supplier_exceptions", run_id="r1")
    assert counts.get("validated") is None and sum(counts.values()) == 60  # no item lost
    for item_id in ids:  # none processed twice: one move out of 'validated' per item, by the right attempt
        moves = [h for h in ledger.history(item_id) if h.from_status == "validated"]
        assert len(moves) == 1, item_id
        assert moves[0].actor == ("ai_tests.classify#2" if item_id in left else "ai_tests.classify#1")

    prompts = llm.stats()["prompts"]
    sent = Counter(key for p in prompts for chunk in chunks for key in chunk if key in p)
    repeated = sorted(key for key, n in sent.items() if n > 1)
    assert repeated == sorted(chunks[2])  # calls repeated for the chunk in flight, and only for it
    assert max(sent.values()) == 2
    assert len(prompts) == (60 + BATCH) // per_call
    assert summary["calls"] == 40 // per_call and summary["cache_hits"] == 0
