"""A process's idle ledger connections (conveyor.ledger.pool): reused, dropped when the server
lost them, never shared with a forked child, bounded in number and idle time, and off with
``ledger_pool_size = 0``."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import psycopg
import pytest

from conveyor.ledger import Ledger, LedgerUnavailable, pool
from tests.support.own_postgres import OwnPostgres


def backend(ledger: Ledger) -> int:
    with ledger.connect() as conn:
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
    assert row is not None
    return int(row[0])


@pytest.fixture(autouse=True)
def _empty_pool(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("AIRFLOW__CONVEYOR__LEDGER_POOL_SIZE", "4")  # room for the siblings these tests keep
    pool.clear()
    yield
    pool.clear()


def test_a_connection_is_used_again_and_each_block_is_its_own_transaction(ledger: Ledger) -> None:
    first = backend(ledger)
    assert backend(ledger) == first
    with pytest.raises(ZeroDivisionError):
        with ledger.connect() as conn:
            conn.execute("CREATE TEMP TABLE scratch (n int)")
            raise ZeroDivisionError  # the block's error rolls its work back...
    with ledger.connect() as conn:  # ...and the connection comes back clean, on the same session
        assert conn.execute("SELECT pg_backend_pid()").fetchone() == (first,)
        assert conn.execute("SELECT to_regclass('pg_temp.scratch')").fetchone() == (None,)
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS


def test_a_connection_left_broken_or_in_autocommit_is_not_handed_on_as_it_is(ledger: Ledger) -> None:
    ledger.upgrade()  # runs in autocommit on a pooled connection
    with ledger.connect() as conn:
        assert conn.autocommit is False
        pid = conn.execute("SELECT pg_backend_pid()").fetchone()
    with pytest.raises(LedgerUnavailable):
        with ledger.connect() as conn:
            conn.execute("SELECT pg_terminate_backend(pg_backend_pid())")
    assert pool.idle_count(ledger.dsn, ledger.application_name) == 0
    assert pid is not None
    assert backend(ledger) != pid[0]


def test_the_size_bounds_what_is_kept_and_zero_keeps_nothing(ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> None:
    with ledger.connect(), ledger.connect(), ledger.connect():
        pass
    assert pool.idle_count(ledger.dsn, ledger.application_name) == 3
    monkeypatch.setenv("AIRFLOW__CONVEYOR__LEDGER_POOL_SIZE", "0")
    pool.clear()
    first = backend(ledger)
    assert pool.idle_count(ledger.dsn, ledger.application_name) == 0
    assert backend(ledger) != first


def test_by_default_a_process_keeps_one_connection_per_ledger(ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AIRFLOW__CONVEYOR__LEDGER_POOL_SIZE")
    with ledger.connect(), ledger.connect():  # two at once: only one is kept when they come back
        pass
    assert pool.idle_count(ledger.dsn, ledger.application_name) == 1
    kept = backend(ledger)
    assert backend(ledger) == kept


def test_a_process_keeps_at_most_max_idle_for_all_its_ledgers_the_least_recent_going_first(
    ledger: Ledger,
) -> None:
    names = [f"conveyor-pool-{n}" for n in range(pool.MAX_IDLE + 2)]
    for name in names:
        backend(Ledger(ledger.dsn, application_name=name))
    assert pool.idle_total() == pool.MAX_IDLE
    assert [pool.idle_count(ledger.dsn, name) for name in names] == [0, 0] + [1] * pool.MAX_IDLE
    with ledger.connect() as conn:  # the server holds as many sessions as are kept, no more
        open_ = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'conveyor-pool-%%'"
        ).fetchone()
    assert open_ == (pool.MAX_IDLE,)


def test_a_connection_idle_longer_than_idle_seconds_is_closed_by_the_process(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW__CONVEYOR__LEDGER_POOL_IDLE_SECONDS", "1")
    quiet = Ledger(ledger.dsn, application_name="conveyor-pool-quiet")
    pid = backend(quiet)
    assert pool.idle_count(quiet.dsn, quiet.application_name) == 1
    deadline = time.monotonic() + 30  # the reaper runs after 1-2 s; generous for a loaded machine
    while True:
        with ledger.connect() as conn:
            alive = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()
        if alive == (0,) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert alive == (0,), "the idle session was still open on the server after 30 s"
    assert pool.idle_count(quiet.dsn, quiet.application_name) == 0
    assert backend(quiet) != pid  # the next use opens a new one


def test_a_forked_child_never_speaks_on_or_ends_its_parents_session(ledger: Ledger) -> None:
    # A fork inside a ``connect`` block (a task runner forking its task): the child leaves the block
    # too, which commits and hands the connection back. None of that may reach the parent's
    # session, which goes on with its transaction.
    with ledger.connect() as conn:
        parent = conn.execute("SELECT pg_backend_pid()").fetchone()
        child = os.fork()
        if child == 0:  # pragma: no cover - runs in the child
            code = 0
            try:
                with ledger.connect() as mine:  # the child's own session
                    code = 0 if mine.execute("SELECT pg_backend_pid()").fetchone() != parent else 3
            except BaseException:
                code = 4
            os._exit(code)  # leaves the parent's block unwound: checked below, the other way
        _, status = os.waitpid(child, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert conn.execute("SELECT pg_backend_pid()").fetchone() == parent


def test_a_child_leaving_a_block_its_parent_opened_cannot_end_the_parents_session(ledger: Ledger) -> None:
    with ledger.connect() as conn:
        parent = conn.execute("SELECT pg_backend_pid()").fetchone()
        conn.execute("CREATE TEMP TABLE kept (n int)")
        child = os.fork()
        if child == 0:  # pragma: no cover - runs in the child
            try:
                conn.commit()  # what leaving the block does; on a socket that is no longer the parent's
                conn.close()
            except BaseException:
                pass
            os._exit(0)
        os.waitpid(child, 0)
        conn.execute("INSERT INTO kept VALUES (1)")  # the parent's transaction is intact
        assert conn.execute("SELECT pg_backend_pid(), count(*) FROM kept").fetchone() == (parent[0], 1)


@pytest.fixture
def own_pg() -> Iterator[OwnPostgres]:
    server = OwnPostgres("pool")
    try:
        yield server
    finally:
        server.close()


@pytest.mark.parametrize("fault", ["restart", "crash"])
def test_idle_connections_the_server_lost_are_dropped_and_a_new_one_opened(own_pg: OwnPostgres, fault: str) -> None:
    ledger = Ledger(own_pg.dsn(), reconnect_seconds=30)
    with ledger.connect(), ledger.connect():  # two idle sessions
        pass
    before = backend(ledger)
    if fault == "crash":
        own_pg.crash(down_seconds=0.5)
    else:
        own_pg.restart("fast")
    after = backend(ledger)  # no error: the dead sessions were noticed at checkout
    assert after != before
    assert pool.idle_count(ledger.dsn, ledger.application_name) == 1
