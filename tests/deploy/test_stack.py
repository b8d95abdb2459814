"""The native deployment harness (tests/support/stack) does what a real deployment does.

One stack for the session: the api-server, scheduler, dag-processor, triggerer and two Celery workers
that share no disk; S3 on loopback. The DAGs are tests/stack_dags/stack_smoke.py.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from tests.conftest import STACK_SMOKE_PREFIX
from tests.stack_dags.stack_smoke import handoff_key
from tests.support.stack import NativeStack, StackError
from tests.support.stack.polling import wait_until

pytestmark = pytest.mark.stack

HANDOFF = "stack_handoff"


def run_to_success(stack: NativeStack, dag_id: str) -> str:
    """Trigger ``dag_id`` over REST (``logical_date: null``) and wait for the run to succeed."""
    stack.wait_for_dag(dag_id)
    stack.unpause(dag_id)
    run_id = stack.trigger(dag_id)
    stack.wait_for_run(dag_id, run_id, timeout=180)
    return run_id


def by_task(stack: NativeStack, dag_id: str, run_id: str) -> dict[str, dict[str, Any]]:
    return {ti["task_id"]: ti for ti in stack.task_instances(dag_id, run_id)}


def handoff_object(stack: NativeStack, run_id: str) -> dict[str, Any]:
    """The hand-off file of a run, read straight from the bucket with boto3."""
    body = stack.s3().get_object(Bucket=stack.options.bucket, Key=f"{STACK_SMOKE_PREFIX}/{handoff_key(run_id)}")
    return dict(json.loads(body["Body"].read()))


@pytest.fixture(scope="module")
def handoff_run(stack: NativeStack) -> str:
    """One successful run of the hand-off DAG, as it first ran (a test that clears runs a run of its own)."""
    return run_to_success(stack, HANDOFF)


def test_the_plugin_is_listed_and_its_api_needs_a_token(stack: NativeStack) -> None:
    plugins = stack.client().get("/api/v2/plugins").json()["plugins"]
    assert "conveyor" in {plugin["name"] for plugin in plugins}

    with stack.anonymous() as anonymous:
        assert anonymous.get("/conveyor/api/review/queue").status_code == 401
    # 200 needs the ledger: the api-server finds it through the connection airflow_settings.yaml loaded.
    answer = stack.client("admin").get("/conveyor/api/review/queue")
    assert answer.status_code == 200, answer.text


def test_a_file_written_on_one_worker_is_read_on_the_other_through_s3(
    stack: NativeStack, handoff_run: str
) -> None:
    tis = by_task(stack, HANDOFF, handoff_run)
    assert (stack.worker_of(tis["write"]), stack.worker_of(tis["read"])) == ("w1", "w2")
    assert tis["write"]["hostname"] != tis["read"]["hostname"]
    assert handoff_object(stack, handoff_run) == {"run_id": handoff_run, "try_number": 1}
    # The tasks wrote nothing where they ran: the hand-off went through the bucket only.
    for name in stack.worker_names:
        assert list((stack.worker_home(name) / "cwd").iterdir()) == []


def test_clearing_the_run_runs_it_again(stack: NativeStack) -> None:
    handoff_run = run_to_success(stack, HANDOFF)
    cleared = stack.clear(HANDOFF, handoff_run)
    assert {ti["task_id"] for ti in cleared} == {"write", "read"}
    # The clear resets the run itself, so waiting for success cannot see the old state.
    assert stack.run(HANDOFF, handoff_run)["state"] in {"queued", "running"}
    stack.wait_for_run(HANDOFF, handoff_run)
    assert {task: ti["try_number"] for task, ti in by_task(stack, HANDOFF, handoff_run).items()} == {
        "write": 2, "read": 2,
    }
    assert handoff_object(stack, handoff_run)["try_number"] == 2

    cleared = stack.clear(HANDOFF, handoff_run, task_ids=["write"], include_downstream=True)
    assert {ti["task_id"] for ti in cleared} == {"write", "read"}
    stack.wait_for_run(HANDOFF, handoff_run)
    tis = by_task(stack, HANDOFF, handoff_run)
    assert {task: (ti["state"], ti["try_number"]) for task, ti in tis.items()} == {
        "write": ("success", 3), "read": ("success", 3),
    }
    assert handoff_object(stack, handoff_run)["try_number"] == 3


def test_a_failed_run_is_reported_with_the_task_log(stack: NativeStack) -> None:
    dag_id = "stack_failing"
    stack.wait_for_dag(dag_id)
    stack.unpause(dag_id)
    run_id = stack.trigger(dag_id)
    with pytest.raises(StackError) as failure:
        stack.wait_for_run(dag_id, run_id, timeout=120)
    message = str(failure.value)
    assert f"run {dag_id}/{run_id} ended failed" in message
    assert "'fail': 'failed'" in message
    # The task's own log, read from the worker that ran it, is in the error.
    assert "stack-smoke: this task fails on purpose" in message


def test_a_deferrable_sensor_waits_on_the_triggerer(stack: NativeStack) -> None:
    dag_id = "stack_deferrable"
    stack.wait_for_dag(dag_id)
    stack.unpause(dag_id)
    run_id = stack.trigger(dag_id)

    def claimed_by_triggerer() -> dict[str, Any] | None:
        ti = stack.task_instance(dag_id, run_id, "wait")
        assert ti["state"] in {None, "scheduled", "queued", "running", "deferred"}, ti["state"]
        trigger = ti.get("trigger") or {}
        return trigger if ti["state"] == "deferred" and trigger.get("triggerer_id") else None

    # The sensor waits 5 s once deferred: polled four times a second, the claim cannot be missed.
    trigger = wait_until(claimed_by_triggerer, timeout=90, what="the triggerer to take the trigger")
    # WaitSensor's TimeDeltaTrigger is stored as the DateTimeTrigger it subclasses.
    assert trigger["classpath"] == "airflow.providers.standard.triggers.temporal.DateTimeTrigger"
    stack.wait_for_run(dag_id, run_id, timeout=60)
    # The trigger's own log is written where it ran: in the triggerer's logs folder.
    triggerer_logs = stack.root / "triggerer" / "airflow" / "logs" / f"dag_id={dag_id}"
    assert [path.name for path in triggerer_logs.rglob("*.log") if ".trigger." in path.name]


def test_a_task_of_a_killed_worker_is_retried_on_the_other_worker(stack: NativeStack) -> None:
    dag_id, task_id = "stack_sleeper", "sleep_then_finish"
    stack.wait_for_dag(dag_id)
    stack.unpause(dag_id)
    run_id = stack.trigger(dag_id)
    victim = stack.worker_running(dag_id, run_id, task_id)
    (survivor,) = set(stack.worker_names) - {victim}

    killed_at = time.monotonic()
    stack.kill_worker(victim)
    try:
        assert stack.components[victim].processes() == []

        def first_try_given_up() -> bool:
            ti = stack.task_instance(dag_id, run_id, task_id)
            return ti["try_number"] > 1 or ti["state"] != "running"

        wait_until(first_try_given_up, timeout=90, what="the scheduler to notice the lost task")
        detected_after = time.monotonic() - killed_at
        stack.wait_for_run(dag_id, run_id, timeout=120)
        finished_after = time.monotonic() - killed_at
    finally:
        stack.restart_worker(victim)

    tries = stack.tries(dag_id, run_id, task_id)
    assert [(t["try_number"], t["hostname"]) for t in tries] == [(1, victim), (2, survivor)]
    # The history records a try that ended unfinished (up_for_retry here) as failed.
    assert [t["state"] for t in tries] == ["failed", "success"]
    print(f"kill -9 of {victim}: lost task noticed after {detected_after:.1f} s, finished on {survivor} "
          f"after {finished_after:.1f} s")
    # [scheduler] task_instance_heartbeat_timeout is 15 s; the check runs every 2 s.
    assert detected_after < 45
