"""A failed step is reported to a person once, however many Airflow components report the failure, and
the alert's "where to look" points at what holds the answer."""

from __future__ import annotations

import json
import threading
from types import SimpleNamespace

import pytest

from conveyor.monitoring.task_alerts import alert_on_failure, failure_message
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

def _context(error: BaseException) -> dict:
    ti = SimpleNamespace(dag_id="supplier_exceptions", task_id="validate", try_number=1, log_url=None)
    return {"ti": ti, "run_id": "manual__1", "exception": error}


def test_a_rejected_batch_points_at_conveyor_batches():
    from airflow.sdk.exceptions import AirflowFailException

    from conveyor.gate.errors import BatchRejected

    try:
        try:
            raise BatchRejected("missing_columns", "column 'supplier_id' missing")
        except BatchRejected as exc:
            raise AirflowFailException(f"validation gate rejected the batch: {exc.reason}") from exc
    except AirflowFailException as failure:
        _, text = failure_message(_context(failure))

    assert "conveyor batches --workflow supplier_exceptions --run 'manual__1'" in text
    assert "conveyor items" not in text


def test_any_other_failure_points_at_the_items():
    _, text = failure_message(_context(RuntimeError("the model timed out")))

    assert "conveyor items --workflow supplier_exceptions --run 'manual__1'" in text
    assert "conveyor batches" not in text
