"""The AI step while its ledger's PostgreSQL restarts or crashes: a fault of our own infrastructure.

The ledger lives on a server of the test's own (tests/support/own_postgres.py), stopped with
``-m fast`` or ``-m immediate`` while the step calls a real HTTP model server. Nothing of the
ledger, the breaker or the runner is patched: the fault is the server going away.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator

import pytest

from conveyor.ai.breaker import CircuitBreaker
from conveyor.ai.runner import run_step
from conveyor.ledger import Ledger, LedgerUnavailable
from conveyor.ledger.faults import patiently
from tests.ai.seeding import exception_rows, seed_exceptions
from tests.ai.test_llm_step import config
from tests.support.own_postgres import OwnPostgres
from tests.support.workflows import declare_all


@pytest.fixture
def own_pg() -> Iterator[OwnPostgres]:
    server = OwnPostgres("ai-faults")
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def fragile_ledger(own_pg: OwnPostgres) -> Ledger:
    """A migrated ledger on the test's own server, connecting as a task does (it waits for a restart)."""
    ledger = Ledger(own_pg.dsn(), reconnect_seconds=30)
    ledger.upgrade()
    declare_all(ledger)
    return ledger


def _fault_later(action, delay: float) -> threading.Thread:  # type: ignore[no-untyped-def]
    thread = threading.Thread(target=lambda: (time.sleep(delay), action()), daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("fault", ["crash", "restart"])
def test_a_ledger_fault_mid_step_fails_no_item_and_calls_the_model_once_per_item(
    fragile_ledger: Ledger, own_pg: OwnPostgres, llm, fault: str
) -> None:
    rows = exception_rows(48)
    ids = seed_exceptions(fragile_ledger, "r1", rows)
    # ~0.4 s per answer, 4 at a time, two chunks of 24 (~2.4 s of calls each): the ledger goes away
    # while the first chunk's calls are out, so the breaker (which reads the ledger) meets the fault.
    llm.configure(latency=0.4)
    down = (lambda: own_pg.crash(down_seconds=3.0)) if fault == "crash" else (lambda: own_pg.restart("fast", 2.0))
    injector = _fault_later(down, 0.8)

    summary = run_step(
        fragile_ledger, config("r1", batch_size=24, max_concurrency=4, breaker_threshold=3, breaker_poll_interval=0.1)
    )
    injector.join()

    assert summary["failed"] == 0 and summary["failure_reasons"] == {}
    statuses = {i.item_id: i.status for i in fragile_ledger.items_by_id(ids)}
    assert set(statuses.values()) <= {"ai_processed", "pending_review"}, statuses
    assert summary["passed"] + summary["review"] == len(ids)
    # No item's reason blames the model for the ledger.
    assert not [i for i in fragile_ledger.items_by_id(ids) if "OperationalError" in (i.last_error or "")]
    # Each item's prompt went out exactly once: the fault cost no model call.
    calls = [llm.calls_for(r["exception_id"]) for r in rows]
    assert calls == [1] * len(rows), calls
    assert llm.stats()["calls"] == len(rows) == summary["calls"]


def test_the_breaker_works_on_its_own_state_while_the_ledger_is_away(fragile_ledger: Ledger, own_pg) -> None:
    breaker = CircuitBreaker(fragile_ledger, "openai:fake@faults", threshold=2, cooldown=60, poll_interval=0.0)

    async def scenario() -> tuple[str, str]:
        await breaker.acquire()  # the ledger is up: the shared row says closed
        own_pg.stop("immediate")
        try:
            await breaker.acquire()  # away: a call may still go out, the model is not to blame
            await breaker.record_failure("HTTP 503")
            await breaker.record_failure("HTTP 503")
            with pytest.raises(Exception, match="circuit breaker open"):
                await breaker.acquire()  # two failures opened it in this process
            away = breaker.read().state
        finally:
            own_pg.start()
        breaker._away_until = None  # look at the ledger now rather than after the back-off
        return away, breaker.read().state

    away, back = asyncio.run(scenario())
    breaker.close()
    assert away == "open"
    assert back == "closed"  # the shared row never saw those failures: other workers were not stopped


def test_patiently_waits_out_a_restart_and_gives_up_after_its_patience(fragile_ledger: Ledger, own_pg) -> None:
    own_pg.stop("fast")
    restarter = _fault_later(own_pg.start, 2.0)
    started = time.monotonic()
    quick = Ledger(own_pg.dsn())  # no reconnect window: every refused connection raises at once
    assert patiently(lambda: quick.count_by_status(workflow="supplier_exceptions"), what="counting") == {}
    restarter.join()
    assert 1.5 < time.monotonic() - started < 20

    own_pg.stop("fast")
    try:
        with pytest.raises(LedgerUnavailable, match="cannot reach the ledger database"):
            patiently(lambda: quick.count_by_status(), what="counting", patience=1.0)
    finally:
        own_pg.start()


def test_a_connection_lost_inside_a_transaction_is_ledger_unavailable(fragile_ledger: Ledger, own_pg) -> None:
    with pytest.raises(LedgerUnavailable, match="lost the ledger database"):
        with fragile_ledger.connect() as conn:
            conn.execute("SELECT 1")
            own_pg.stop("immediate")
            conn.execute("SELECT 1")
    own_pg.start()
    assert fragile_ledger.count_by_status() == {}
