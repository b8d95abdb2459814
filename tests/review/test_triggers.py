"""HumanReviewTrigger run by asyncio against the real ledger, as the triggerer runs it."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from airflow.sdk.serde import deserialize, serialize

from conveyor.review.pending_counter import PendingCounter, counters_of_this_loop
from conveyor.review.review_queue import ReviewQueue
from conveyor.review.triggers import HumanReviewTrigger
from tests.review.conftest import route_to_review

WF = "supplier_exceptions"
REPO = Path(__file__).resolve().parents[2]


def soon(seconds: float) -> datetime:
    return datetime.now(UTC) + timedelta(seconds=seconds)


async def first_event(trigger: HumanReviewTrigger, timeout: float = 20):
    return await asyncio.wait_for(anext(trigger.run()), timeout)


def test_trigger_fires_once_every_item_has_a_decision(ledger):
    route_to_review(ledger, WF, "run-1", pending=["A"], quarantined=["B"])
    queue = ReviewQueue(ledger)
    trigger = HumanReviewTrigger(workflow=WF, run_id="run-1", deadline=soon(60), poll_interval=0.2)

    async def scenario():
        waiting = asyncio.create_task(first_event(trigger))
        await asyncio.sleep(0.7)
        assert not waiting.done(), "fired while items were still waiting"
        counter = next(iter(counters_of_this_loop().values()))
        polls_before = counter.queries
        await asyncio.to_thread(queue.decide, f"{WF}:A", "approve", reviewer="alice")
        await asyncio.sleep(0.5)
        assert not waiting.done(), "fired with B still quarantined"
        await asyncio.to_thread(queue.decide, f"{WF}:B", "reject", reviewer="bob")
        event = await waiting
        return event, polls_before, counters_of_this_loop()

    started = time.monotonic()
    event, polls_before, counters_after = asyncio.run(scenario())

    assert event.payload["status"] == "decided"
    assert event.payload["workflow"] == WF and event.payload["run_id"] == "run-1"
    assert polls_before >= 2
    assert counters_after == {}, "the shared connection must be released when the trigger ends"
    assert time.monotonic() - started < 10


def test_trigger_times_out_at_its_deadline(ledger):
    route_to_review(ledger, WF, "run-1", pending=["A", "B"])
    deadline = soon(0.8)
    trigger = HumanReviewTrigger(workflow=WF, run_id="run-1", deadline=deadline, poll_interval=0.25)

    event = asyncio.run(first_event(trigger))

    assert event.payload["status"] == "timed_out"
    assert event.payload["pending"] == 2
    assert datetime.now(UTC) >= deadline
    assert event.payload["deadline"] == deadline.isoformat()


def test_trigger_with_nothing_to_review_fires_at_once(ledger):
    route_to_review(ledger, WF, "run-1", validated=["A"])
    trigger = HumanReviewTrigger(workflow=WF, run_id="run-1", deadline=soon(60), poll_interval=30)

    started = time.monotonic()
    event = asyncio.run(first_event(trigger))

    assert event.payload["status"] == "decided" and time.monotonic() - started < 2


def test_many_triggers_share_one_connection_and_one_query_per_tick(ledger):
    runs = [f"run-{i}" for i in range(25)]
    for run in runs:
        route_to_review(ledger, WF, run, pending=["A"] if run != "run-0" else [], quarantined=[f"Q-{run}"])
    queue = ReviewQueue(ledger)
    interval = 0.5

    async def scenario():
        triggers = [
            HumanReviewTrigger(workflow=WF, run_id=r, deadline=soon(60), poll_interval=interval) for r in runs
        ]
        tasks = [asyncio.create_task(first_event(t)) for t in triggers]
        await asyncio.sleep(4 * interval + 0.2)
        counter: PendingCounter = next(iter(counters_of_this_loop().values()))
        queries_while_waiting = counter.queries
        with psycopg.connect(ledger.dsn) as conn:
            connections = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'conveyor-review-trigger'"
                " AND datname = current_database()"
            ).fetchone()[0]
        ids = [e.item.item_id for e in (await asyncio.to_thread(queue.list, limit=500)).entries]
        for item_id in ids:
            await asyncio.to_thread(queue.decide, item_id, "reject", reviewer="alice")
        events = await asyncio.gather(*tasks)
        return queries_while_waiting, connections, events

    queries, connections, events = asyncio.run(scenario())

    assert all(e.payload["status"] == "decided" for e in events)
    assert connections == 1
    # 25 triggers over ~4 ticks: one batched query at start and one per tick, not 25 per tick.
    assert queries <= 7, queries


def test_unknown_ledger_connection_yields_an_error_event(ledger):
    trigger = HumanReviewTrigger(
        workflow=WF, run_id="run-1", deadline=soon(60), poll_interval=1, conn_id="no_such"
    )

    event = asyncio.run(first_event(trigger))

    assert event.payload["status"] == "error"
    assert "no_such" in event.payload["message"]


def test_ledger_outage_does_not_end_the_wait(ledger, monkeypatch):
    # A connection to a port where nothing listens: every poll fails; the wait goes on to the deadline.
    monkeypatch.setenv("AIRFLOW_CONN_LEDGER_DOWN", "postgres://postgres@127.0.0.1:9/nothing")
    trigger = HumanReviewTrigger(
        workflow=WF, run_id="run-1", deadline=soon(1.0), poll_interval=0.2, conn_id="ledger_down"
    )

    event = asyncio.run(first_event(trigger))

    assert event.payload["status"] == "timed_out"
    assert event.payload["pending"] is None


_TRIGGERER = """
import asyncio, json, sys
from airflow.sdk._shared.module_loading import import_string
from airflow.sdk.serde import deserialize

classpath, stored = sys.argv[1], json.loads(sys.argv[2])
sys.stdin.readline()  # started early (imports are slow); runs when told to
trigger = import_string(classpath)(**deserialize(stored))
print("started", flush=True)

async def main():
    async for event in trigger.run():
        print(json.dumps(event.payload), flush=True)
        return

asyncio.run(main())
"""


def _start_triggerer(classpath: str, stored: object, log: Path) -> subprocess.Popen:
    """A triggerer process, imported and waiting for a line on stdin before it runs the trigger."""
    return subprocess.Popen(
        [sys.executable, "-c", _TRIGGERER, classpath, json.dumps(stored)],
        stdin=subprocess.PIPE,
        text=True,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        cwd=REPO,
        env=dict(os.environ),
    )


def _wait_for_poll(dsn: str, exclude: frozenset[int] = frozenset(), timeout: float = 60) -> frozenset[int]:
    """Until a triggerer process (not one of ``exclude``) holds its ledger connection: it has polled."""
    end = time.monotonic() + timeout
    with psycopg.connect(dsn, autocommit=True) as conn:
        while time.monotonic() < end:
            pids = frozenset(
                r[0]
                for r in conn.execute(
                    "SELECT pid FROM pg_stat_activity WHERE application_name = 'conveyor-review-trigger'"
                    " AND datname = current_database()"
                ).fetchall()
            )
            if pids - exclude:
                return pids - exclude
            time.sleep(0.2)
    raise AssertionError("the triggerer never polled the ledger")


def test_restarted_triggerer_recreates_the_trigger_from_its_serialized_kwargs(ledger, tmp_path):
    """The triggerer is killed while the sensor waits; a new one carries on from the stored kwargs."""
    route_to_review(ledger, WF, "run-1", pending=["A", "B"])
    deadline = soon(120)
    classpath, kwargs = HumanReviewTrigger(
        workflow=WF, run_id="run-1", deadline=deadline, poll_interval=0.3
    ).serialize()
    # What Airflow stores in its trigger table (serde-encoded JSON), and what a restarted
    # triggerer reads back.
    stored = json.loads(json.dumps(serialize(kwargs)))

    first = _start_triggerer(classpath, stored, tmp_path / "first.log")
    second = _start_triggerer(classpath, stored, tmp_path / "second.log")
    try:
        first.stdin.write("go\n")
        first.stdin.flush()
        first_backends = _wait_for_poll(ledger.dsn)
        ReviewQueue(ledger).decide(f"{WF}:A", "approve", reviewer="alice")
        time.sleep(0.5)
        assert first.poll() is None, (tmp_path / "first.log").read_text()
        first.send_signal(signal.SIGKILL)  # the triggerer dies while the sensor waits
        first.wait(timeout=10)
        assert "decided" not in (tmp_path / "first.log").read_text()

        recreated = HumanReviewTrigger(**deserialize(stored))
        assert recreated.serialize() == (classpath, kwargs)
        assert recreated.deadline == deadline.astimezone(UTC)

        second.stdin.write("go\n")
        second.stdin.flush()
        _wait_for_poll(ledger.dsn, exclude=first_backends)
        time.sleep(0.5)
        assert second.poll() is None, "the recreated trigger fired while B was still waiting"
        ReviewQueue(ledger).decide(f"{WF}:B", "reject", reviewer="bob")
        second.wait(timeout=30)
    finally:
        for process in (first, second):
            if process.poll() is None:
                process.send_signal(signal.SIGKILL)
                process.wait(timeout=10)
    lines = (tmp_path / "second.log").read_text().splitlines()
    event = json.loads(lines[-1])
    assert event["status"] == "decided", lines
    assert event["deadline"] == deadline.astimezone(UTC).isoformat()


def test_trigger_rejects_bad_arguments():
    with pytest.raises(ValueError, match="timezone-aware"):
        HumanReviewTrigger(workflow=WF, run_id="r", deadline="2026-01-01T00:00:00")
    with pytest.raises(ValueError, match="poll_interval"):
        HumanReviewTrigger(workflow=WF, run_id="r", poll_interval=0)


def test_a_decision_wakes_the_trigger_at_once_not_on_its_next_tick(ledger):
    """A 60 s poll interval, and the run's last decision ends the wait in about a second: the
    decision's NOTIFY wakes only the triggers of its run, which look once (batched)."""
    route_to_review(ledger, WF, "run-1", pending=["A"])
    route_to_review(ledger, WF, "run-2", pending=["B"])
    queue = ReviewQueue(ledger)
    mine = HumanReviewTrigger(workflow=WF, run_id="run-1", deadline=soon(120), poll_interval=60)
    other = HumanReviewTrigger(workflow=WF, run_id="run-2", deadline=soon(120), poll_interval=60)

    async def scenario():
        waiting = asyncio.create_task(first_event(mine, timeout=30))
        bystander = asyncio.create_task(first_event(other, timeout=30))
        await asyncio.sleep(1.5)  # both looked once and listen
        counter = next(iter(counters_of_this_loop().values()))
        looks_before = counter.queries
        decided_at = time.monotonic()
        await asyncio.to_thread(queue.decide, f"{WF}:A", "approve", reviewer="alice")
        event = await waiting
        woke_after = time.monotonic() - decided_at
        looks = counter.queries - looks_before
        notifications = counter.notifications
        assert not bystander.done(), "a decision on another run must not end this wait"
        bystander.cancel()
        return event, woke_after, looks, notifications

    event, woke_after, looks, notifications = asyncio.run(scenario())

    assert event.payload["status"] == "decided"
    assert woke_after < 5, f"woke {woke_after:.1f}s after the decision (poll interval 60 s)"
    assert notifications >= 1 and looks == 1
