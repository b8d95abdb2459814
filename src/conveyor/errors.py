"""The error hierarchy of Conveyor: one root, one base per concern, declared here.

``except ConveyorError`` catches everything Conveyor raises on purpose (a DAG's own callback, a
script around the CLI); ``except GateError`` everything the gate does. The concern bases live
here, so the whole tree reads in one place; each error a concern raises is defined next to its
code and subclasses its concern's base (``conveyor/ledger/errors.py``, ``conveyor/gate/errors.py``,
...): those carry fields and messages only their package knows, and defining them here would
make this module import the packages back. The tree (leaves where they are defined)::

    ConveyorError
    ├── LedgerError          ledger.errors: LedgerUnavailable, UnknownItem, UnknownWorkflow,
    │   │                    IllegalTransition; ledger.values: UnstorableValue (also ValueError)
    │   └── ReviewError      review.errors: InvalidDecision (also ValueError), ApprovalBlocked,
    │                        NotAwaitingReview, DecisionConflict; review.claims: ClaimHeld;
    │                        review.input_guard: InputRejected (also ValueError);
    │                        review.revalidation: RevalidationError, review.item_escalation:
    │                        ItemsOverdue (both also RuntimeError); review.operators: SignOffRejected
    ├── GateError            gate.errors: BatchRejected (InputChanged, RepeatedInput), SuiteError
    ├── AIStepError          ai.errors: ModelCallError, BreakerOpen, AIStepFailed;
    │                        ai.definitions: InputError (also ValueError)
    ├── IntakeError          intake.documents: UnreadableDocument (also ValueError);
    │                        intake.operators: SourceUnreachable (also RuntimeError)
    ├── EffectError          effects.publish: UnrenderableItems (also AirflowFailException: the
    │                        task fails without a retry)
    ├── MonitoringError      monitoring.notifiers: ChannelNotConfigured (also RuntimeError)
    └── DeployError          deploy.settings_file: SettingsFileError (also ValueError)

A review decision is a guarded ledger write, and callers caught its errors as ``LedgerError``
before this tree existed, so ``ReviewError`` stays under ``LedgerError``. The builtin and Airflow
bases an error had are kept beside its concern base: code that catches ``ValueError`` still
catches a rejected input, and Airflow still fails an ``AirflowFailException`` without retrying.

This module imports nothing: the CLI and ``import conveyor`` load it for free.
"""

from __future__ import annotations


class ConveyorError(Exception):
    """Base class of every error Conveyor raises on purpose."""


class LedgerError(ConveyorError):
    """Base class of the item ledger's errors (and, below it, review decisions')."""


class ReviewError(LedgerError):
    """Base class of the review queue's and the review steps' errors."""


class GateError(ConveyorError):
    """Base class of the validation gate's errors."""


class AIStepError(ConveyorError):
    """Base class of the AI step's errors."""


class IntakeError(ConveyorError):
    """Base class of the intake steps' errors (feeds, inboxes, documents)."""


class EffectError(ConveyorError):
    """Base class of the side-effect steps' errors (publications, item effects, archives)."""


class MonitoringError(ConveyorError):
    """Base class of monitoring's errors (metrics, alerts and their channels)."""


class DeployError(ConveyorError):
    """Base class of deployment errors (the settings file)."""
