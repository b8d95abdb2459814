"""AIStepOperator: parameters, templated fields, and how failures reach Airflow (retry or not)."""

from __future__ import annotations

import pytest

from conveyor_examples.supplier_exceptions import CLASSIFY_EXCEPTION
from tests.ai.conftest import PRIMARY_CONN
from tests.ai.seeding import context, exception_rows, seed_exceptions


def test_an_empty_run_fails_without_retries_and_an_open_breaker_fails_for_the_retry(ledger, llm):
    from airflow.sdk.exceptions import AirflowException, AirflowFailException

    from conveyor.ai.operators import AIStepOperator

    empty = AIStepOperator(
        task_id="classify", workflow="supplier_exceptions", ai_task=CLASSIFY_EXCEPTION, run_id="nothing"
    )
    with pytest.raises(AirflowFailException, match="has no items in the ledger at all"):
        empty.execute(context("nothing"))

    seed_exceptions(ledger, "r1", exception_rows(3))
    llm.configure(fail_all="503")
    broken = AIStepOperator(
        task_id="classify",
        workflow="supplier_exceptions",
        ai_task=CLASSIFY_EXCEPTION,
        run_id="r1",
        model=PRIMARY_CONN,
        fallback_model="None",  # what "{{ params.fallback }}" renders for a missing value: no fallback
        breaker_threshold=1,
        max_concurrency=1,
        backoff_base=0.01,
    )
    with pytest.raises(AirflowException, match="circuit breaker open") as failed:
        broken.execute(context("r1"))
    assert not isinstance(failed.value, AirflowFailException)  # Airflow retries it after the cool-down


def test_items_per_call_comes_from_a_rendered_template_and_a_bad_value_fails_without_retries(ledger, llm):
    from airflow.sdk.exceptions import AirflowFailException

    from conveyor.ai.operators import AIStepOperator

    seed_exceptions(ledger, "r1", exception_rows(4))

    def step(items_per_call: str) -> AIStepOperator:
        return AIStepOperator(
            task_id="classify",
            workflow="supplier_exceptions",
            ai_task=CLASSIFY_EXCEPTION,
            run_id="r1",
            model=PRIMARY_CONN,
            items_per_call=items_per_call,  # what "{{ var.value.get(...) }}" renders: a string
        )

    with pytest.raises(AirflowFailException, match="items_per_call must be a whole number of at least 1, got 'two'"):
        step("two").execute(context("r1"))
    assert llm.stats()["calls"] == 0

    summary = step("2").execute(context("r1"))
    assert summary["items"] == 4 and summary["calls"] == llm.stats()["calls"] == 2


def test_declared_task_and_fields_are_checked_before_anything_runs(ledger):
    from conveyor.ai.definitions import get_ai_task, register_ai_task
    from conveyor.ai.operators import AIStepOperator
    from conveyor.ai.runner import AIStepRunner, StepConfig
    from conveyor_examples.invoices import CLASSIFY_SPEND

    assert AIStepOperator.template_fields == (
        "run_id",
        "model",
        "fallback_model",
        "from_status",
        "to_status",
        "items_per_call",
    )
    register_ai_task(CLASSIFY_EXCEPTION)
    with pytest.raises(ValueError, match="unknown AI task 'summarise'; registered: classify_exception"):
        get_ai_task("summarise")
    with pytest.raises(ValueError, match="does not allow 'validated' -> 'published'"):
        AIStepRunner(
            ledger,
            StepConfig.of(
                workflow="supplier_exceptions",
                run_id="r",
                task=get_ai_task("classify_exception"),
                actor="t",
                to_status="published",
            ),
        )
    with pytest.raises(ValueError, match="cannot import model 'no_such_module:GptLocal'"):
        AIStepRunner(
            ledger,
            StepConfig.of(
                workflow="invoice_processing",
                run_id="r",
                task=CLASSIFY_SPEND,
                actor="t",
                model="no_such_module:GptLocal",
            ),
        )
    with pytest.raises(ValueError, match="min_confidence must be between 0 and 1"):
        StepConfig.of(
            workflow="invoice_processing", run_id="r", task=CLASSIFY_SPEND, actor="t", min_confidence=70
        )


def test_without_docs_the_operator_declares_its_recovery_strategies_for_the_lint():
    from conveyor.ai.operators import AIStepOperator
    from conveyor.recovery_doc import Recovery, declared

    plain = AIStepOperator(task_id="a", workflow="supplier_exceptions", ai_task=CLASSIFY_EXCEPTION)
    backed = AIStepOperator(
        task_id="b",
        workflow="supplier_exceptions",
        ai_task=CLASSIFY_EXCEPTION,
        model=PRIMARY_CONN,
        fallback_model="local",
    )
    own = AIStepOperator(
        task_id="c",
        workflow="supplier_exceptions",
        ai_task=CLASSIFY_EXCEPTION,
        doc_md="Recovery: manual intervention — a person reruns it",
    )

    assert declared(plain.doc_md) == [
        Recovery.CIRCUIT_BREAKER,
        Recovery.RETRY,
        Recovery.GRACEFUL_DEGRADATION,
        Recovery.MANUAL_INTERVENTION,
    ]
    assert Recovery.ALTERNATIVE_PATH in declared(backed.doc_md)
    assert declared(own.doc_md) == [Recovery.MANUAL_INTERVENTION]


def test_the_operator_defaults_are_the_settings_and_a_wrong_setting_fails_the_dag_at_parse():
    import dataclasses
    import inspect

    from conveyor.ai.operators import AIStepOperator
    from conveyor.ai.retries import RetryPolicy
    from conveyor.ai.step_config import StepSettings

    tunables = {f.name: f.default for f in dataclasses.fields(StepSettings) if f.name != "retry"}
    tunables |= {f.name: f.default for f in dataclasses.fields(RetryPolicy)}
    parameters = inspect.signature(AIStepOperator.__init__).parameters
    assert {name: parameters[name].default for name in tunables} == tunables  # every one a parameter, same default

    op = AIStepOperator(
        task_id="a", workflow="supplier_exceptions", ai_task=CLASSIFY_EXCEPTION, min_confidence=0.9, max_attempts=2
    )
    assert op.settings == StepSettings(min_confidence=0.9, retry=RetryPolicy(max_attempts=2))
    for setting, value in (("min_confidence", 1.5), ("batch_size", 0), ("lease_seconds", -1), ("items_per_call", 0)):
        with pytest.raises(ValueError, match=f"{setting} must be"):
            AIStepOperator(task_id="a", workflow="supplier_exceptions", ai_task=CLASSIFY_EXCEPTION, **{setting: value})
    # A template is checked once rendered, in the run.
    AIStepOperator(task_id="a", workflow="supplier_exceptions", ai_task=CLASSIFY_EXCEPTION, items_per_call="{{ x }}")
    # A cluster policy (or a test) sets a tunable on the task: the settings the run reads change, checked.
    assert (op.min_confidence, op.max_attempts, op.spot_check) == (0.9, 2, StepSettings().spot_check)
    op.spot_check, op.max_attempts = 0.5, 4
    assert op.settings == StepSettings(min_confidence=0.9, spot_check=0.5, retry=RetryPolicy(max_attempts=4))
    with pytest.raises(ValueError, match="batch_size must be"):
        op.batch_size = 0
    assert op.settings.batch_size == StepSettings().batch_size
