"""The circuit breaker is shared by separate worker processes through the ledger database."""

from __future__ import annotations

from tests.ai.conftest import PRIMARY_CONN
from tests.ai.seeding import exception_rows, seed_exceptions
from tests.ai.workers import Worker, preload

# Long enough that no worker, however slowly it starts on a loaded machine, sees it pass by itself:
# the test moves the clock instead (cool_down_passes). With 6 s, a worker forked 7 s late under CI
# load probed where the test expected it blocked.
COOLDOWN = 600.0
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


def cool_down_passes(ledger) -> None:
    """The cool-down passes: the open breaker's clock is moved back rather than waited out."""
    with ledger.connect() as conn:
        conn.execute(
            "UPDATE conveyor.ai_breakers SET opened_at = opened_at - make_interval(secs => %s)"
            " WHERE endpoint LIKE 'openai:fake-model@%%' AND state = 'open'",
            (COOLDOWN + 1,),
        )


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
    cool_down_passes(ledger)
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
    cool_down_passes(ledger)
    outcome, summary = Worker("run-b", try_number=3, **PARAMS).start().result()
    assert outcome == "success" and summary["items"] == 5
    assert breaker_row(ledger)[:2] == ("closed", 0)
    outcome, summary = Worker("run-a", try_number=3, **PARAMS).start().result()
    assert outcome == "success" and summary["items"] == 5
    assert llm.stats()["calls"] == 10
    counts = ledger.count_by_status(workflow="supplier_exceptions")
    assert counts.get("validated") is None and sum(counts.values()) == 10
