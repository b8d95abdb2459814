"""ValidationGateOperator's settings: GateConfig's defaults, checked at parse and once rendered."""

from __future__ import annotations

import dataclasses
import inspect

import pytest
from airflow.sdk.exceptions import AirflowFailException

from conveyor.gate.config import GateConfig
from conveyor.gate.operators import ValidationGateOperator

WF = "supplier_exceptions"


def test_the_operator_defaults_are_the_configs():
    parameters = inspect.signature(ValidationGateOperator.__init__).parameters
    fields = dataclasses.fields(GateConfig)
    shared = [f for f in fields if f.name in parameters and f.default is not dataclasses.MISSING]
    assert len(shared) >= 15
    assert {f.name: parameters[f.name].default for f in shared} == {f.name: f.default for f in shared}


@pytest.mark.parametrize(
    ("setting", "value", "message"),
    [
        ("max_exception_rate", 1.5, "max_exception_rate must be between 0 and 1, got 1.5"),
        ("min_rows", 0, "min_rows must be at least 1"),
        ("chunk_size", 0, "chunk_size must be at least 1"),
        ("on_repeat", "ignore", "on_repeat must be 'fail' or 'skip'"),
        ("sql", "select 1", "source= or sql=, not both"),
    ],
)
def test_a_setting_no_run_could_use_fails_the_dag_at_parse_naming_it(setting, value, message):
    with pytest.raises(ValueError, match=message):
        ValidationGateOperator(task_id="gate", workflow=WF, suite="s", source="a.csv", **{setting: value})


@pytest.mark.parametrize(
    ("setting", "rendered", "message"),
    [
        ("max_exception_rate", "1.5", "max_exception_rate must be between 0 and 1, got 1.5"),
        ("max_exception_rate", "lots", "max_exception_rate must be a float, got 'lots'"),
        ("min_rows", "ten", "min_rows must be an int, got 'ten'"),
        ("min_rows", "0", "min_rows must be at least 1"),
    ],
)
def test_a_template_that_renders_to_a_wrong_setting_fails_the_task_naming_it(setting, rendered, message):
    gate = ValidationGateOperator(task_id="gate", workflow=WF, suite="s", source="a.csv", **{setting: "{{ x }}"})
    setattr(gate, setting, rendered)  # what Airflow's render_template_fields leaves on the task
    with pytest.raises(AirflowFailException, match=f"validation gate gate: {message}"):
        gate.gate_config({"run_id": "r1"})  # type: ignore[arg-type]


def test_rendered_settings_reach_the_config():
    gate = ValidationGateOperator(task_id="gate", workflow=WF, suite="s", source="a.csv", min_rows="{{ x }}")
    gate.min_rows = "5"
    config = gate.gate_config({"run_id": "r1"})  # type: ignore[arg-type]
    assert (config.min_rows, config.max_exception_rate, config.step, config.run_id) == (5, 0.1, "gate", "r1")
