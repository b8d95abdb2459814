"""DAGs that prove the native stack of tests/support/stack works; they import only Airflow.

Where the hand-off objects live comes from the stack's extra environment:
``STACK_SMOKE_S3_BASE`` (``s3://bucket/prefix``) and ``STACK_SMOKE_CONN_ID`` (an AWS connection).
"""

from __future__ import annotations

import json
import os
import re
import time
from datetime import timedelta
from typing import Any

import pendulum
from airflow.providers.standard.sensors.time_delta import WaitSensor
from airflow.sdk import DAG, ObjectStoragePath, task

START = pendulum.datetime(2026, 1, 1, tz="UTC")


def handoff_key(run_id: str) -> str:
    """The object key (below the base) of a run's hand-off file; run ids carry ':' and '+'."""
    return f"handoff/{re.sub(r'[^A-Za-z0-9._-]', '_', run_id)}.json"


def _storage(key: str) -> ObjectStoragePath:
    return ObjectStoragePath(f"{os.environ['STACK_SMOKE_S3_BASE']}/{key}", conn_id=os.environ["STACK_SMOKE_CONN_ID"])


with DAG("stack_handoff", schedule=None, start_date=START, catchup=False, tags=["stack"]):

    @task(queue="w1")
    def write(**context: Any) -> str:
        """On worker 1: leave a file for the next task in object storage (the workers share no disk)."""
        key = handoff_key(context["run_id"])
        payload = {"run_id": context["run_id"], "try_number": context["ti"].try_number}
        _storage(key).write_text(json.dumps(payload))
        return key

    @task(queue="w2")
    def read(key: str, **context: Any) -> dict[str, Any]:
        """On worker 2: read the file back and check it is this run's."""
        payload = json.loads(_storage(key).read_text())
        if payload["run_id"] != context["run_id"]:
            raise ValueError(f"hand-off file of another run: {payload}")
        return payload

    read(write())


with DAG("stack_deferrable", schedule=None, start_date=START, catchup=False, tags=["stack"]):
    # Measured from the task's start, so it always defers; the triggerer ends it (end_from_trigger).
    WaitSensor(task_id="wait", time_to_wait=timedelta(seconds=5), deferrable=True)


with DAG("stack_sleeper", schedule=None, start_date=START, catchup=False, tags=["stack"]):

    @task(retries=1, retry_delay=timedelta(seconds=1))
    def sleep_then_finish(**context: Any) -> int:
        """First try: runs until its worker is killed (bounded at 10 minutes). The retry finishes at once."""
        try_number = context["ti"].try_number
        if try_number == 1:
            time.sleep(600)
        return int(try_number)

    sleep_then_finish()


with DAG("stack_failing", schedule=None, start_date=START, catchup=False, tags=["stack"]):

    @task(retries=0)
    def fail() -> None:
        """Fails at once: the harness must put this task's log in its error."""
        raise ValueError("stack-smoke: this task fails on purpose")

    fail()
