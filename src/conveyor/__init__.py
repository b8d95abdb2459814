"""Conveyor: guardrails around the AI steps of business workflows, for Apache Airflow 3.

Everything a DAG author needs is importable from here (see ``__all__``)::

    from conveyor import AIStepOperator, HumanReviewSensor, ValidationGateOperator, Workflow

Names are resolved on first use, so ``import conveyor`` costs nothing and a DAG file pays only
for what it imports: Great Expectations, pandas and model SDKs load when a task runs, never at
DAG-parse time.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.2.0"

#: public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    # declarations
    "Workflow": "conveyor.workflow",
    "ReviewField": "conveyor.workflow",
    "Status": "conveyor.ledger.statuses",
    "AITask": "conveyor.ai.definitions",
    "ItemView": "conveyor.ai.definitions",
    "InputError": "conveyor.ai.definitions",
    "register_ai_task": "conveyor.ai.definitions",
    # operators and the sensor
    "SnapshotExtractOperator": "conveyor.intake.operators",
    "InboxIntakeOperator": "conveyor.intake.operators",
    "ValidationGateOperator": "conveyor.gate.operators",
    "AIStepOperator": "conveyor.ai.operators",
    "HumanReviewSensor": "conveyor.review.sensors",
    "Escalation": "conveyor.review.sensors",
    "SignOffOperator": "conveyor.review.operators",
    "ApprovalRoutingOperator": "conveyor.routing.operators",
    "PromoteItemsOperator": "conveyor.routing.promote",
    "PublishOperator": "conveyor.effects.publish",
    "ItemEffectOperator": "conveyor.effects.item_effects",
    "EffectItem": "conveyor.effects.item_effects",
    "EffectOutcome": "conveyor.effects.item_effects",
    "ArchiveOperator": "conveyor.effects.archive",
    # the model contract and the offline text classifier
    "StepModel": "conveyor.ai.models.base",
    "ModelInput": "conveyor.ai.models.base",
    "Prediction": "conveyor.ai.models.base",
    "TextClassifierModel": "conveyor.ai.models.text_classifier",
    # rule checks on model output: the contract and the library's own
    "Check": "conveyor.ai.checks",
    "Required": "conveyor.ai.checks",
    "NotVague": "conveyor.ai.checks",
    "OneSentence": "conveyor.ai.checks",
    "Mentions": "conveyor.ai.checks",
    "InRange": "conveyor.ai.checks",
    "OneOf": "conveyor.ai.checks",
    "PlausibleDates": "conveyor.ai.checks",
    "LineItemsAddUp": "conveyor.ai.checks",
    # recovery declarations and task defaults
    "Recovery": "conveyor.recovery_doc",
    "recovery": "conveyor.recovery_doc",
    "default_args": "conveyor.dag_defaults",
    "deadline_missed": "conveyor.monitoring.task_alerts",
    "RUN_QUEUED_AT": "conveyor.monitoring.deadlines",
    # the health check (the workflow_health DAG)
    "measure_health": "conveyor.monitoring.tasks",
    "evaluate_health": "conveyor.monitoring.tasks",
    "notify_health": "conveyor.monitoring.tasks",
    # the ledger, for a workflow's own tasks
    "Ledger": "conveyor.ledger.store",
    "NewItem": "conveyor.ledger.store",
    "ItemUpdate": "conveyor.ledger.store",
    # files on object storage, and the text of inbox documents (PDFs through their text layer)
    "storage_path": "conveyor.storage",
    "document_text": "conveyor.intake.documents",
    "UnreadableDocument": "conveyor.intake.documents",
    # the root of every error Conveyor raises (the tree is in conveyor/errors.py)
    "ConveyorError": "conveyor.errors",
}

__all__ = [
    "AIStepOperator",
    "AITask",
    "ApprovalRoutingOperator",
    "ArchiveOperator",
    "Check",
    "ConveyorError",
    "EffectItem",
    "EffectOutcome",
    "Escalation",
    "HumanReviewSensor",
    "InRange",
    "InboxIntakeOperator",
    "InputError",
    "ItemEffectOperator",
    "ItemUpdate",
    "ItemView",
    "Ledger",
    "LineItemsAddUp",
    "Mentions",
    "ModelInput",
    "NewItem",
    "NotVague",
    "OneOf",
    "OneSentence",
    "PlausibleDates",
    "Prediction",
    "PromoteItemsOperator",
    "PublishOperator",
    "RUN_QUEUED_AT",
    "Recovery",
    "Required",
    "ReviewField",
    "SignOffOperator",
    "SnapshotExtractOperator",
    "Status",
    "StepModel",
    "TextClassifierModel",
    "UnreadableDocument",
    "ValidationGateOperator",
    "Workflow",
    "deadline_missed",
    "default_args",
    "document_text",
    "evaluate_health",
    "measure_health",
    "notify_health",
    "recovery",
    "register_ai_task",
    "storage_path",
]

if TYPE_CHECKING:
    from conveyor.ai.checks import (
        Check,
        InRange,
        LineItemsAddUp,
        Mentions,
        NotVague,
        OneOf,
        OneSentence,
        PlausibleDates,
        Required,
    )
    from conveyor.ai.definitions import AITask, InputError, ItemView, register_ai_task
    from conveyor.ai.models.base import ModelInput, Prediction, StepModel
    from conveyor.ai.models.text_classifier import TextClassifierModel
    from conveyor.ai.operators import AIStepOperator
    from conveyor.dag_defaults import default_args
    from conveyor.effects.archive import ArchiveOperator
    from conveyor.effects.item_effects import EffectItem, EffectOutcome, ItemEffectOperator
    from conveyor.effects.publish import PublishOperator
    from conveyor.errors import ConveyorError
    from conveyor.gate.operators import ValidationGateOperator
    from conveyor.intake.documents import UnreadableDocument, document_text
    from conveyor.intake.operators import InboxIntakeOperator, SnapshotExtractOperator
    from conveyor.ledger.statuses import Status
    from conveyor.ledger.store import ItemUpdate, Ledger, NewItem
    from conveyor.monitoring.deadlines import RUN_QUEUED_AT
    from conveyor.monitoring.task_alerts import deadline_missed
    from conveyor.monitoring.tasks import evaluate_health, measure_health, notify_health
    from conveyor.recovery_doc import Recovery, recovery
    from conveyor.review.operators import SignOffOperator
    from conveyor.review.sensors import Escalation, HumanReviewSensor
    from conveyor.routing.operators import ApprovalRoutingOperator
    from conveyor.routing.promote import PromoteItemsOperator
    from conveyor.storage import storage_path
    from conveyor.workflow import ReviewField, Workflow


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'conveyor' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
