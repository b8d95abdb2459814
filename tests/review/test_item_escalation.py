"""Escalation per item age: the trigger fires when the oldest item becomes overdue, and each
action (alert, reject, fail) happens once per wait, against the real ledger and a real webhook."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from conveyor.review.item_escalation import ItemEscalation, ItemsOverdue, escalate_items, overdue_items
from conveyor.review.review_queue import ReviewQueue
from conveyor.review.triggers import HumanReviewTrigger
from tests.monitoring.servers import http_receiver
from tests.review.conftest import route_to_review
from tests.review.test_sensors import task_state, xcom

WF = "supplier_exceptions"


def age_items(ledger, ids: list[str], seconds: float) -> None:
    """Make the items look as if they entered the queue ``seconds`` ago."""
    with psycopg.connect(ledger.dsn, autocommit=True) as conn:
        conn.execute(
            "UPDATE conveyor.items SET updated_at = now() - make_interval(secs => %s) WHERE item_id = ANY(%s)",
            (seconds, ids),
        )


@pytest.fixture
def webhook(monkeypatch):
    """A real webhook receiver, configured as Conveyor's alert channel."""
    with http_receiver() as (inbox, port):
        monkeypatch.setenv(
            "AIRFLOW_CONN_CONVEYOR_ALERT_WEBHOOK",
            json.dumps({"conn_type": "http", "host": "127.0.0.1", "port": port, "schema": "http",
                        "extra": {"endpoint": "/hooks/conveyor"}}),
        )  # fmt: skip
        yield inbox


def test_trigger_fires_when_the_oldest_item_becomes_overdue_not_on_its_poll_tick(ledger):
    route_to_review(ledger, WF, "run-1", pending=["A"], quarantined=["B"])
    age_items(ledger, [f"{WF}:A"], 1.0)  # A entered the queue 1 s ago, B just now
    trigger = HumanReviewTrigger(
        workflow=WF, run_id="run-1", deadline=datetime.now(UTC) + timedelta(minutes=5),
        poll_interval=60, step="review", item_timeout=2.5,
    )  # fmt: skip
    started = time.monotonic()
    event = asyncio.run(asyncio.wait_for(anext(trigger.run()), 20))
    waited = time.monotonic() - started

    assert event.payload["status"] == "items_overdue"
    assert event.payload["pending"] == 2
    assert 1.0 <= waited < 4.0, f"fired after {waited:.2f}s: A was due 1.5 s after the start"


def test_escalated_items_do_not_fire_the_trigger_again(ledger, webhook):
    route_to_review(ledger, WF, "run-1", pending=["A"])
    age_items(ledger, [f"{WF}:A"], 10)
    done = escalate_items(ledger, workflow=WF, run_id="run-1", step="review", item_timeout=5,
                          action=ItemEscalation.ALERT, actor="test.review#1")  # fmt: skip
    assert [o.item_id for o in done] == [f"{WF}:A"]
    trigger = HumanReviewTrigger(
        workflow=WF, run_id="run-1", deadline=datetime.now(UTC) + timedelta(seconds=1.5),
        poll_interval=0.3, step="review", item_timeout=5,
    )  # fmt: skip
    event = asyncio.run(asyncio.wait_for(anext(trigger.run()), 20))
    assert event.payload["status"] == "timed_out"  # A was escalated: only the deadline remained


def test_alert_tells_a_person_once_per_wait_and_the_items_keep_waiting(ledger, webhook):
    route_to_review(ledger, WF, "run-1", pending=["A", "B"], quarantined=["C"])
    age_items(ledger, [f"{WF}:A", f"{WF}:C"], 120)
    args = dict(workflow=WF, run_id="run-1", step="review", item_timeout=60, action=ItemEscalation.ALERT,
                actor="test.review#1")  # fmt: skip

    first = escalate_items(ledger, **args)
    again = escalate_items(ledger, **args)  # the next look, or a second attempt of the step

    assert sorted(o.item_id for o in first) == [f"{WF}:A", f"{WF}:C"] and again == []
    bodies = webhook.json_bodies()
    assert len(bodies) == 1, bodies
    text = json.dumps(bodies[0])
    assert f"{WF}:A" in text and f"{WF}:C" in text and f"{WF}:B" not in text
    assert "waited more than 1 min" in text and "supplier_id is null" in text
    assert ledger.get(f"{WF}:A").status == "pending_review"  # still waiting for a person

    # C comes back to the queue after a correction that fails again: a new wait, escalated anew.
    ReviewQueue(ledger).decide(f"{WF}:C", "correct", reviewer="carol", changes={"supplier_id": "V-1"})
    ledger.transition(WF, [f"{WF}:C"], to_status="quarantined", actor="test.gate#2", reason="still bad")
    assert overdue_items(ledger, workflow=WF, run_id="run-1", step="review", item_timeout=60) == []
    age_items(ledger, [f"{WF}:C"], 120)
    assert [o.item_id for o in escalate_items(ledger, **args)] == [f"{WF}:C"]
    assert len(webhook.json_bodies()) == 2


def test_alert_with_no_channel_is_not_recorded_so_the_next_look_tries_again(ledger, monkeypatch):
    from conveyor.monitoring.notifiers import ChannelNotConfigured

    for name in ("CONN_CONVEYOR_ALERT_WEBHOOK", "CONN_CONVEYOR_SMTP", "VAR_CONVEYOR_ALERT_EMAIL"):
        monkeypatch.delenv(f"AIRFLOW_{name}", raising=False)
    route_to_review(ledger, WF, "run-1", pending=["A"])
    age_items(ledger, [f"{WF}:A"], 120)
    with pytest.raises(ChannelNotConfigured):
        escalate_items(ledger, workflow=WF, run_id="run-1", step="review", item_timeout=60,
                       action=ItemEscalation.ALERT, actor="test.review#1")  # fmt: skip
    assert len(overdue_items(ledger, workflow=WF, run_id="run-1", step="review", item_timeout=60)) == 1


def test_reject_moves_only_items_nobody_decided_meanwhile(ledger):
    route_to_review(ledger, WF, "run-1", pending=["A", "B"])
    age_items(ledger, [f"{WF}:A", f"{WF}:B"], 120)
    ReviewQueue(ledger).decide(f"{WF}:B", "approve", reviewer="alice")  # decided just in time

    done = escalate_items(ledger, workflow=WF, run_id="run-1", step="review", item_timeout=60,
                          action=ItemEscalation.REJECT, actor="test.review#1")  # fmt: skip

    assert [o.item_id for o in done] == [f"{WF}:A"]
    a = ledger.get(f"{WF}:A")
    assert a.status == "rejected" and "waited more than 1 min for a person" in (a.reason or "")
    assert ledger.history(f"{WF}:A")[-1].actor == "test.review#1"
    assert ledger.get(f"{WF}:B").status == "ai_processed"  # approved: on to its review target


def test_fail_names_the_items_and_records_nothing(ledger):
    route_to_review(ledger, WF, "run-1", pending=["A"])
    age_items(ledger, [f"{WF}:A"], 3700)
    with pytest.raises(ItemsOverdue, match=rf"{WF}:A: pending_review for 1 h 01 min"):
        escalate_items(ledger, workflow=WF, run_id="run-1", step="review", item_timeout=3600,
                       action=ItemEscalation.FAIL, actor="test.review#1")  # fmt: skip
    assert len(overdue_items(ledger, workflow=WF, run_id="run-1", step="review", item_timeout=3600)) == 1


def test_review_step_rejects_items_that_waited_too_long_and_the_run_goes_on(airflow_db, ledger):
    """dag.test(): nobody decides; each item is rejected once it has waited 1.5 s, long before the
    step's own 2-minute timeout, and the run goes on with the rest."""
    from tests.dag_fixtures.review_dags import review_item_reject

    started = time.monotonic()
    run = review_item_reject.test()

    assert run.state == "success"
    assert time.monotonic() - started < 60
    summary = xcom(run, "wait_for_review")
    assert summary["outcome"] == "all_decided" and summary["item_escalations"] == {"reject": 3}
    assert xcom(run, "downstream") == {"rejected": 3, "validated": 1}


def test_review_step_fails_on_an_overdue_item_with_item_escalation_fail(airflow_db, ledger):
    from tests.dag_fixtures.review_dags import review_item_fail

    run = review_item_fail.test()

    assert run.state == "failed"
    assert task_state(run, "wait_for_review") == "failed"
    assert ledger.get(f"{WF}:Q1").status == "quarantined"  # the items stay on the queue


def test_sensor_checks_item_escalation_arguments():
    from conveyor.review.sensors import HumanReviewSensor

    with pytest.raises(ValueError, match="item_escalation must be one of"):
        HumanReviewSensor(task_id="w", workflow=WF, item_timeout=60, item_escalation="ignore")
    with pytest.raises(ValueError, match="item_timeout must be positive"):
        HumanReviewSensor(task_id="w", workflow=WF, item_timeout=0)
    sensor = HumanReviewSensor(task_id="w", workflow=WF, item_timeout=timedelta(hours=4), item_escalation="reject")
    assert sensor.item_timeout == 14400 and sensor.item_escalation is ItemEscalation.REJECT
