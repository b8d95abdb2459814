"""Which model answers a step: the ``model`` (and ``fallback_model``) of :class:`AIStepOperator`.

* ``"local"``: the task's ``default_model`` (offline, shipped with the workflow);
* a :class:`~conveyor.ai.models.base.StepModel` object, a ``StepModel`` class, or a callable
  returning one;
* ``"module:attribute"`` (or ``"module.attribute"``): one of those, imported by path;
* any other string: the id of an Airflow connection of type ``pydanticai`` (an LLM).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any

from conveyor.ai.definitions import AITask
from conveyor.ai.models.base import StepModel

LOCAL = "local"


def import_attribute(path: str) -> Any:
    """The object ``module:attribute`` (or ``module.attribute``) names."""
    module_name, sep, attribute = path.partition(":")
    if not sep:
        module_name, _, attribute = path.rpartition(".")
    try:
        module = importlib.import_module(module_name)
        return getattr(module, attribute)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ValueError(f"cannot import model {path!r}: {exc}") from None


def is_import_path(spec: str) -> bool:
    return ":" in spec or ("." in spec and all(part.isidentifier() for part in spec.split(".")))


def as_step_model(value: Any, where: str) -> StepModel:
    """A StepModel from an object, a class or a factory."""
    if isinstance(value, StepModel):
        return value
    if inspect.isclass(value) or callable(value):
        built = value()
        if isinstance(built, StepModel):
            return built
        raise TypeError(f"{where} returned {type(built).__name__}, not a conveyor StepModel")
    raise TypeError(f"{where} is {type(value).__name__}, not a conveyor StepModel, its class or a factory")


def build_model(spec: Any, task: AITask, llm: Callable[[str], StepModel]) -> StepModel:
    """The model ``spec`` names for ``task``.

    :param llm: builds the LLM model for a connection id.
    """
    if isinstance(spec, str):
        if spec == LOCAL:
            if task.default_model is None:
                raise ValueError(
                    f"AI task {task.name!r} declares no default_model, so model='local' names nothing: give "
                    "the step a model (a pydanticai connection id, a StepModel or 'module:Class') or declare "
                    "AITask(default_model=...)"
                )
            return build_model(task.default_model, task, llm)
        if is_import_path(spec):
            return as_step_model(import_attribute(spec), f"model {spec!r}")
        return llm(spec)
    return as_step_model(spec, f"model {spec!r}")
