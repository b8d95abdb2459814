"""The AI step spread over shards: task processes of their own claiming chunks of one run.

Each shard is a forked process running the operator, as Airflow runs a mapped task instance; the
model is the loopback LLM server, whose request log proves how often each item was asked.
"""

from __future__ import annotations

import time
from collections import Counter

from tests.ai.conftest import PRIMARY_CONN
from tests.ai.seeding import exception_rows, seed_exceptions
from tests.ai.workers import Worker, preload

WF = "supplier_exceptions"
BATCH = 5
PARAMS = dict(model=PRIMARY_CONN, batch_size=BATCH, max_concurrency=2, call_timeout=30.0, min_confidence=0.5)


def _asked(llm, keys) -> Counter[str]:
    prompts = llm.stats()["prompts"]
    return Counter(key for p in prompts for key in keys if key in p)


def _moves_out(ledger, item_id: str) -> list:
    return [h for h in ledger.history(item_id) if h.from_status == "validated"]


def _leases(ledger) -> list[tuple]:
    with ledger.connect() as conn:
        return conn.execute("SELECT item_id, holder, attempt FROM conveyor.step_leases ORDER BY item_id").fetchall()


def test_three_shards_at_once_process_every_item_once_with_one_call_per_item(ledger, llm):
    preload()
    rows = exception_rows(60)
    keys = [r["exception_id"] for r in rows]
    ids = seed_exceptions(ledger, "r1", rows)
    llm.configure(latency=0.1)

    workers = [Worker("r1", shard=n, **PARAMS).start() for n in range(3)]
    results = [w.result(timeout=120) for w in workers]

    assert [outcome for outcome, _ in results] == ["success"] * 3, results
    summaries = [s for _, s in results]
    assert sum(s["items"] for s in summaries) == 60 == sum(s["claimed"] for s in summaries)
    assert all(s["items"] > 0 for s in summaries), [s["items"] for s in summaries]  # all three worked
    assert [s["shard"] for s in summaries] == [0, 1, 2] and sum(s["raced"] for s in summaries) == 0
    assert llm.stats()["calls"] == 60 == sum(s["calls"] for s in summaries)  # one request per item
    assert set(_asked(llm, keys).values()) == {1}
    counts = ledger.count_by_status(workflow=WF, run_id="r1")
    assert counts.get("validated") is None and sum(counts.values()) == 60
    for item_id in ids:
        assert len(_moves_out(ledger, item_id)) == 1, item_id
    assert _leases(ledger) == []  # released as the items moved


def _kill_mid_chunk(ledger, llm, *, lease_seconds: float) -> tuple[list[tuple], Worker]:
    """Shard 0 alone, every request hanging: killed once its first chunk is leased and in flight."""
    llm.configure(latency=60)
    first = Worker("r1", try_number=1, shard=0, lease_seconds=lease_seconds, **PARAMS).start()
    deadline = time.monotonic() + 60
    while llm.stats()["calls"] < 2 or not _leases(ledger):
        assert time.monotonic() < deadline and first.process.is_alive(), "the shard never got going"
        time.sleep(0.02)
    first.kill()
    assert first.process.exitcode == -9
    leased = _leases(ledger)
    assert leased and {h for _, h, _ in leased} == {"ai_tests/r1/classify/shard=0"}
    llm.configure(reset=False, latency=0.05)  # the model is fast again for whoever comes next
    return leased, first


def test_a_killed_shards_chunk_is_taken_over_by_a_sibling_once_its_lease_expired(ledger, llm):
    preload()
    rows = exception_rows(40)
    keys = [r["exception_id"] for r in rows]
    ids = seed_exceptions(ledger, "r1", rows)
    leased, _ = _kill_mid_chunk(ledger, llm, lease_seconds=4)
    asked_before = _asked(llm, keys)  # the killed chunk's requests in flight
    killed_at = time.monotonic()

    outcome, summary = Worker("r1", shard=1, **PARAMS).start().result(timeout=120)

    assert outcome == "success", summary
    assert time.monotonic() - killed_at >= 3  # it waited for the dead sibling's lease to expire
    assert summary["items"] == 40 == summary["claimed"]  # the sibling did all, the killed chunk too
    counts = ledger.count_by_status(workflow=WF, run_id="r1")
    assert counts.get("validated") is None and sum(counts.values()) == 40  # none lost
    for item_id in ids:  # none moved twice, all by the sibling
        moves = _moves_out(ledger, item_id)
        assert len(moves) == 1 and moves[0].actor == "ai_tests.classify#1", item_id
    asked = _asked(llm, keys)
    repeated = {key for key, n in asked.items() if n > 1}
    assert repeated == set(asked_before) and max(asked.values()) == 2  # only the chunk in flight
    assert set(asked_before) <= {item_id.split(":", 1)[1] for item_id, _, _ in leased}
    assert llm.stats()["calls"] == 40 + sum(asked_before.values())
    assert _leases(ledger) == []


def test_a_retry_of_the_killed_shard_re_takes_its_own_leases_at_once(ledger, llm):
    preload()
    rows = exception_rows(40)
    keys = [r["exception_id"] for r in rows]
    ids = seed_exceptions(ledger, "r1", rows)
    leased, _ = _kill_mid_chunk(ledger, llm, lease_seconds=300)  # would block a sibling for 5 minutes
    asked_before = _asked(llm, keys)
    killed_at = time.monotonic()

    outcome, summary = Worker("r1", try_number=2, shard=0, lease_seconds=300, **PARAMS).start().result(timeout=120)

    assert outcome == "success", summary
    assert time.monotonic() - killed_at < 60  # not waiting for any expiry
    assert summary["items"] == 40 and summary["calls"] == 40
    for item_id in ids:
        moves = _moves_out(ledger, item_id)
        assert len(moves) == 1 and moves[0].actor == "ai_tests.classify#2", item_id
    asked = _asked(llm, keys)
    assert {key for key, n in asked.items() if n > 1} == set(asked_before)
    assert llm.stats()["calls"] == 40 + sum(asked_before.values())
    assert _leases(ledger) == []


def test_a_shard_that_finds_nothing_left_succeeds_a_run_without_items_fails(ledger, llm):
    preload()
    ids = seed_exceptions(ledger, "r1", exception_rows(10))
    outcome, summary = Worker("r1", shard=0, **PARAMS).start().result()
    assert outcome == "success" and summary["items"] == 10

    outcome, summary = Worker("r1", shard=1, **PARAMS).start().result()  # its sibling took them all
    assert outcome == "success" and summary["items"] == 0 and summary["claimed"] == 0
    assert len(ids) == 10 and llm.stats()["calls"] == 10

    outcome, message = Worker("nothing", shard=0, **PARAMS).start().result()
    assert outcome == "failed" and "has no items in the ledger at all" in message


def test_a_shard_never_claims_back_the_items_it_deferred_and_lets_them_go_when_it_fails(ledger, llm):
    """Items whose calls kept failing stay waiting, under the failing attempt's own lease: the
    attempt must not hand them to itself again (a loop), and must release them when it ends."""
    preload()
    rows = exception_rows(10)
    keys = [r["exception_id"] for r in rows]
    seed_exceptions(ledger, "r1", rows)
    llm.configure(fail_all="500")
    params = {**PARAMS, "max_attempts": 1, "breaker_threshold": 1000}

    outcome, message = Worker("r1", shard=0, **params).start().result(timeout=60)

    assert outcome == "failed" and "stay in 'validated' for the retry" in message, message
    assert llm.stats()["calls"] == 10 and set(_asked(llm, keys).values()) == {1}  # each asked once
    assert _leases(ledger) == []  # free for a sibling or the retry
    assert len(ledger.item_ids(workflow=WF, run_id="r1", status="validated")) == 10

    llm.configure(reset=True)
    outcome, summary = Worker("r1", try_number=2, shard=0, **params).start().result(timeout=60)
    assert outcome == "success" and summary["items"] == 10 and llm.stats()["calls"] == 10
