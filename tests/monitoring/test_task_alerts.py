"""A failed step is reported to a person once, however many Airflow components report the failure."""

from __future__ import annotations

import json
import threading
from types import SimpleNamespace

import pytest

from conveyor.monitoring.task_alerts import alert_on_failure
from tests.monitoring.servers import http_receiver


def failure(try_number: int = 1) -> dict:
    """The part of Airflow's task context the failure callback reads (Airflow's objects, not ours)."""
    ti = SimpleNamespace(dag_id="supplier_exceptions", task_id="validate", try_number=try_number, map_index=-1,
                         log_url="http://airflow/log")
    return {"ti": ti, "run_id": "manual__1", "exception": RuntimeError("column 'supplier_id' missing")}


def use_webhook(monkeypatch: pytest.MonkeyPatch, port: int) -> None:
    monkeypatch.setenv(
        "AIRFLOW_CONN_CONVEYOR_ALERT_WEBHOOK",
        json.dumps({"conn_type": "http", "host": "127.0.0.1", "port": port, "schema": "http",
                    "extra": {"endpoint": "/hooks/conveyor"}}),
    )  # fmt: skip


def test_two_reporters_of_one_failed_try_send_one_alert_and_the_next_try_its_own(ledger, monkeypatch):
    with http_receiver() as (inbox, port):
        use_webhook(monkeypatch, port)
        # The task's own process and the scheduler (the worker was lost) report the same try at once.
        reporters = [threading.Thread(target=alert_on_failure, args=(failure(),)) for _ in range(2)]
        for reporter in reporters:
            reporter.start()
        for reporter in reporters:
            reporter.join()
        assert len(inbox.requests) == 1
        alert_on_failure(failure())  # a third, late report of the same try
        assert len(inbox.requests) == 1
        alert_on_failure(failure(try_number=2))  # the retry failed too: a new failure, a new alert
        assert len(inbox.requests) == 2
    texts = [json.dumps(body) for body in inbox.json_bodies()]
    assert "(try 1)" in texts[0] and "(try 2)" in texts[1]


def test_an_alert_no_channel_accepted_is_sent_by_the_next_reporter(ledger, monkeypatch):
    with http_receiver(status=500) as (refused, port):
        use_webhook(monkeypatch, port)
        alert_on_failure(failure())  # logged, not raised; its claim is given back
        assert len(refused.requests) == 1
    with http_receiver() as (inbox, port):
        use_webhook(monkeypatch, port)
        alert_on_failure(failure())
        assert len(inbox.requests) == 1
