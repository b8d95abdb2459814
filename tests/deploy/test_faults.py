"""Faults of our own infrastructure on a real deployment, and the way back from a failed run.

The session's native stack keeps its ledger on a PostgreSQL of its own (``stack.ledger_server``),
which these tests restart (``-m fast``) and crash (``-m immediate``, a few seconds down) while a
supplier run is at the gate, the AI step (on the loopback LLM, answers taking ~1.5 s) and publish.
Failed runs (a renamed column at the gate, a broken setting at the AI step) are cleared through
Airflow's REST API with ``reset_dag_runs: true``, as the UI's "Clear" does, and finish.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from conveyor.ledger import Ledger
from tests.conftest import STACK_LLM_CONN
from tests.deploy.test_deployment import (
    SUPPLIER,
    StackPeople,
    Started,
    deliver_supplier_extract,
    effects,
    finish,
    keys,
    start,
)
from tests.support.stack import NativeStack
from tests.support.stack.polling import wait_until

pytestmark = [pytest.mark.stack, pytest.mark.timeout(1500)]


def set_variable(stack: NativeStack, key: str, value: str) -> None:
    client = stack.client()
    if client.patch(f"/api/v2/variables/{key}", json={"key": key, "value": value}).status_code == 404:
        assert client.post("/api/v2/variables", json={"key": key, "value": value}).status_code == 201


def delete_variable(stack: NativeStack, key: str) -> None:
    stack.client().delete(f"/api/v2/variables/{key}")


def test_ledger_restarts_and_crashes_during_gate_ai_step_and_publish_end_in_one_green_run(
    stack: NativeStack, stack_llm: Any
) -> None:
    server = stack.ledger_server
    assert server is not None
    set_variable(stack, "conveyor_supplier_model", STACK_LLM_CONN)
    set_variable(stack, "conveyor_llm_items_per_call", "8")
    stack_llm.configure(reset=True, latency=1.5, record_prompts=True)
    faults: dict[str, str] = {}
    try:
        started = start(stack, SUPPLIER, {"extract_path": deliver_supplier_extract(stack, delivery=5)})
        started.reviewer.interval = 0.5

        stack.wait_for_task(SUPPLIER, started.run_id, "validate", ("running", "success"), timeout=300)
        server.restart("fast")
        faults["gate"] = stack.task_instance(SUPPLIER, started.run_id, "validate")["state"]

        # The AI step's first requests are out (8 items each, ~1.5 s per answer): crash mid-chunk.
        wait_until(lambda: stack_llm.stats()["calls"] >= 4, timeout=300, what="the AI step's first calls")
        down = time.monotonic()
        server.stop("immediate")
        # A reviewer meanwhile: 503 with Retry-After, never a 500; the same request works once it is back.
        queue = f"/conveyor/api/review/queue?workflow={SUPPLIER}&run_id={started.run_id}"
        away = stack.client("rita").get(queue)
        time.sleep(max(0.0, 3.0 - (time.monotonic() - down)))
        server.start()
        back = stack.client("rita").get(queue)
        faults["ai_step"] = f"{stack.task_instance(SUPPLIER, started.run_id, 'classify_and_draft')['state']} " \
                            f"after {stack_llm.stats()['calls']} call(s)"

        stack.wait_for_task(SUPPLIER, started.run_id, "publish_report", ("running", "success"), timeout=600)
        server.crash(down_seconds=3.0)
        faults["publish"] = stack.task_instance(SUPPLIER, started.run_id, "publish_report")["state"]

        run = finish(stack, started, timeout=600)
    finally:
        delete_variable(stack, "conveyor_supplier_model")
        delete_variable(stack, "conveyor_llm_items_per_call")
    print(f"faults landed: {faults}; reviewer waited out {started.reviewer.unavailable} 503 answer(s)")

    assert (away.status_code, away.headers.get("retry-after")) == (503, "5"), away.text
    assert "the ledger is unavailable" in away.json()["detail"]
    assert back.status_code == 200, back.text
    assert run["state"] == "success"
    done = effects(stack, started)
    assert set(done["statuses"]) <= {"published", "rejected"}, done["statuses"]
    ledger = Ledger(stack.databases.ledger_dsn)
    items = ledger.items(workflow=SUPPLIER, run_id=started.run_id, limit=None)
    assert not [i.item_id for i in items if "OperationalError" in (i.last_error or "") or i.status == "failed"]
    # Every item that reached the model was asked once: the faults cost no model call.
    asked = [i for i in items if i.ai_result]
    assert asked and all(stack_llm.calls_for(i.item_id.split(":", 1)[1]) == 1 for i in asked)
    # One report, published once.
    reports = [k for k in keys(stack, f"reports/{SUPPLIER}/") if f"/{started.run_id.replace(':', '_')}/" in k]
    assert sorted(k.rsplit(".", 1)[1] for k in reports) == ["html", "md"], reports
    report = f"{SUPPLIER}:report:{started.run_id}"
    assert [row[2] for row in done["outbox"] if row[0] == report] == ["done"]  # the report's one outbox record


def _restart_people(stack: NativeStack, started: Started) -> Started:
    from conveyor.quickstart.reviewer import ScriptedReviewer, WorkflowRun

    again = Started(started.dag_id, started.run_id,
                    ScriptedReviewer(StackPeople(stack), WorkflowRun(started.dag_id, started.dag_id),  # type: ignore[arg-type]
                                     started.run_id, interval=1.0))
    again.reviewer.start()
    return again


def test_failed_runs_with_an_open_deadline_are_cleared_over_rest_and_finish(stack: NativeStack) -> None:
    """The README's recovery: fix the cause, then clear the failed run (``reset_dag_runs: true``); each
run has its 2-hour deadline still open, which Airflow 3.3.2's clear trips over with
``DAGRUN_QUEUED_AT`` (a 500)."""
    # 1. The gate: the feed renamed a column. The run fails at once, naming it.
    path = deliver_supplier_extract(stack, delivery=6)
    name = path.rsplit("/", 1)[1]
    good = stack.s3().get_object(Bucket=stack.options.bucket, Key=f"conveyor/{path}")["Body"].read()
    stack.s3().put_object(Bucket=stack.options.bucket, Key=f"conveyor/{path}",
                          Body=good.replace(b"supplier_id", b"vendor_id", 1))
    # 2. The AI step: a broken setting (the Variable the step reads). It fails once, naming it.
    # Both runs go at once: the first never reaches the AI step.
    set_variable(stack, "conveyor_llm_items_per_call", "eight")
    at_gate = start(stack, SUPPLIER, {"extract_path": path})
    at_ai = start(stack, SUPPLIER, {"extract_path": deliver_supplier_extract(stack, delivery=7)})
    try:
        stack.wait_for_run(SUPPLIER, at_gate.run_id, ("failed",), timeout=300)
        stack.wait_for_run(SUPPLIER, at_ai.run_id, ("failed",), timeout=600)
    finally:
        at_gate.reviewer.stop()
        at_ai.reviewer.stop()
        delete_variable(stack, "conveyor_llm_items_per_call")
    assert stack.task_instance(SUPPLIER, at_gate.run_id, "validate")["state"] == "failed"
    assert stack.tries(SUPPLIER, at_gate.run_id, "validate")[-1]["try_number"] == 1  # bad data: no retry
    assert stack.task_instance(SUPPLIER, at_ai.run_id, "classify_and_draft")["state"] == "failed"

    # 3. Publish: the ledger goes down as the report is being published, and the operator on call
    # presses "Mark failed" on the stuck task (the run fails) before the ledger is back.
    server = stack.ledger_server
    assert server is not None
    at_publish = start(stack, SUPPLIER, {"extract_path": deliver_supplier_extract(stack, delivery=8)})
    stack.wait_for_task(SUPPLIER, at_publish.run_id, "approve_items", ("success",), timeout=600)
    server.stop("fast")
    try:
        stack.wait_for_task(SUPPLIER, at_publish.run_id, "publish_report", ("running",), timeout=120)
        ti = f"/api/v2/dags/{SUPPLIER}/dagRuns/{at_publish.run_id}/taskInstances/publish_report"
        marked = stack.client().patch(ti, json={"new_state": "failed"})
        assert marked.status_code == 200, marked.text
        stack.wait_for_run(SUPPLIER, at_publish.run_id, ("failed",), timeout=120)
    finally:
        at_publish.reviewer.stop()
        server.start()
    assert keys(stack, f"reports/{SUPPLIER}/{at_publish.run_id.replace(':', '_')}/") == {}

    # The fixes: the feed delivered again with its real header; the Variable removed above; the ledger up.
    stack.s3().put_object(Bucket=stack.options.bucket, Key=f"conveyor/{path}", Body=good)
    # The operator clears the three failed runs one after the other; they finish side by side.
    cleared_again = []
    for failed, task_ids in ((at_gate, None), (at_ai, ["classify_and_draft"]), (at_publish, ["publish_report"])):
        started_clear = time.monotonic()
        cleared = stack.clear(SUPPLIER, failed.run_id, task_ids=task_ids, include_downstream=task_ids is not None)
        assert cleared, (failed.run_id, name)
        print(f"cleared {failed.run_id} ({len(cleared)} task(s)) in {time.monotonic() - started_clear:.1f} s")
        cleared_again.append(_restart_people(stack, failed))
    for failed in cleared_again:
        run = finish(stack, failed, timeout=600)
        assert run["state"] == "success"
        done = effects(stack, failed)
        assert set(done["statuses"]) <= {"published", "rejected"}, done["statuses"]
        report = f"{SUPPLIER}:report:{failed.run_id}"
        assert [row[2] for row in done["outbox"] if row[0] == report] == ["done"]  # published once
        assert len([k for k in done["reports"] if f"/{failed.run_id.replace(':', '_')}/" in k]) == 2


def test_a_worker_killed_in_the_middle_of_the_ai_step_loses_no_item_and_repays_at_most_one_chunk(
    stack: NativeStack, stack_llm: Any
) -> None:
    """The supplier workflow on the loopback LLM (one Variable away); ``kill -9`` of the worker running
    the AI step once its first chunk is committed."""
    stack.client().post("/api/v2/variables", json={"key": "conveyor_supplier_model", "value": STACK_LLM_CONN})
    stack_llm.configure(reset=True, latency=0.3, record_prompts=True)
    try:
        started = start(stack, SUPPLIER, {"extract_path": deliver_supplier_extract(stack, delivery=3)})
        ledger = Ledger(stack.databases.ledger_dsn)
        victim = stack.worker_running(SUPPLIER, started.run_id, "classify_and_draft", timeout=300)

        def first_chunk_committed() -> bool:
            with ledger.connect() as conn:
                (moved,) = conn.execute(
                    "SELECT count(*) FROM conveyor.transitions WHERE run_id = %s AND from_status = 'validated'",
                    (started.run_id,),
                ).fetchone()
            return moved >= 200  # AIStepOperator's batch_size: one commit per chunk

        wait_until(first_chunk_committed, timeout=240, what="the AI step's first chunk")
        stack.kill_worker(victim)
        try:
            run = finish(stack, started, timeout=600)
        finally:
            stack.restart_worker(victim)
    finally:
        stack.client().delete("/api/v2/variables/conveyor_supplier_model")

    assert run["state"] == "success"
    tries = stack.tries(SUPPLIER, started.run_id, "classify_and_draft")
    assert [t["hostname"] for t in tries][0] == victim and tries[-1]["hostname"] != victim
    with ledger.connect() as conn:
        (validated,) = conn.execute(
            "SELECT count(*) FROM conveyor.transitions WHERE run_id = %s AND to_status = 'validated'",
            (started.run_id,),
        ).fetchone()
        out_of_validated = conn.execute(
            "SELECT item_id, count(*) FROM conveyor.transitions WHERE run_id = %s AND from_status = 'validated'"
            " GROUP BY item_id", (started.run_id,),
        ).fetchall()
    assert len(out_of_validated) == validated  # no item lost...
    assert {n for _, n in out_of_validated} == {1}  # ...and none processed twice
    calls = stack_llm.stats()["calls"]
    print(f"kill -9 of {victim} during classify_and_draft: {validated} items, {calls} model calls, "
          f"tries on {[t['hostname'] for t in tries]}")
    assert validated <= calls <= validated + 200, (calls, validated)  # at most the chunk in flight again
