"""The circuit breaker is shared by separate worker processes through the ledger database."""

from __future__ import annotations

import time

from tests.ai.conftest import PRIMARY_CONN
from tests.ai.seeding import exception_rows, seed_exceptions
from tests.ai.workers import Worker, preload

COOLDOWN = 6.0
PARAMS = dict(
    model=PRIMARY_CONN,
    breaker_threshold=3,
    breaker_cooldown=COOLDOWN,
    max_attempts=10,
    backoff_base=0.01,
    backoff_max=0.05,
    max_concurrency=1,
    call_timeout=5.0,
)


def breaker_row(ledger) -> tuple:
    with ledger.connect() as conn:
        return conn.execute(
            "SELECT state, failures, opened_at, now() FROM conveyor.ai_breakers"
            " WHERE endpoint LIKE 'openai:fake-model@%'"
        ).fetchone()


def wait_for_cooldown(ledger) -> None:
    _, _, opened_at, now = breaker_row(ledger)
    time.sleep(max(0.0, COOLDOWN + 0.2 - (now - opened_at).total_seconds()))


def test_breaker_opens_in_one_worker_blocks_another_and_half_opens_for_one_probe(ledger, llm):
    preload()
    rows = exception_rows(10)
    seed_exceptions(ledger, "run-a", rows[:5])
    seed_exceptions(ledger, "run-b", rows[5:])
    llm.configure(fail_all="500")

    # Worker A hits the failing endpoint: three consecutive failures open the breaker.
    outcome, message = Worker("run-a", **PARAMS).start().result()
    assert outcome == "failed" and "circuit breaker open for model endpoint 'openai:fake-model@" in message
    assert llm.stats()["calls"] == 3
    state, failures, opened_at, _ = breaker_row(ledger)
    assert (state, failures) == ("open", 3)

    # Worker B, another process, never touches the network while the breaker is open.
    outcome, message = Worker("run-b", **PARAMS).start().result()
    assert outcome == "failed" and "after 3 consecutive failures; it half-opens at" in message
    assert llm.stats()["calls"] == 3

    # After the cool-down both workers start at once: exactly one wins the half-open probe; it
    # fails, so the breaker opens again with a fresh cool-down.
    wait_for_cooldown(ledger)
    llm.configure(reset=False, latency=0.3)
    racing = [
        Worker("run-a", try_number=2, **PARAMS).start(),
        Worker("run-b", try_number=2, **PARAMS).start(),
    ]
    results = [w.result() for w in racing]
    assert [r[0] for r in results] == ["failed", "failed"]
    assert llm.stats()["calls"] == 4
    state, failures, reopened_at, _ = breaker_row(ledger)
    assert (state, failures) == ("open", 4) and reopened_at > opened_at

    # The service recovers. After the cool-down, B's probe succeeds and closes the breaker; A follows.
    llm.configure(reset=True)
    wait_for_cooldown(ledger)
    outcome, summary = Worker("run-b", try_number=3, **PARAMS).start().result()
    assert outcome == "success" and summary["items"] == 5
    assert breaker_row(ledger)[:2] == ("closed", 0)
    outcome, summary = Worker("run-a", try_number=3, **PARAMS).start().result()
    assert outcome == "success" and summary["items"] == 5
    assert llm.stats()["calls"] == 10
    counts = ledger.count_by_status(workflow="supplier_exceptions")
    assert counts.get("validated") is None and sum(counts.values()) == 10
