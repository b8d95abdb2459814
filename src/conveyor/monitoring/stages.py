"""Which stage of a workflow the time an item spends in each status belongs to.

An item's cycle time (entry to completion) is the sum of the times it spent in each status. To say
whether the model or the review queue is the bottleneck, every status of a chain is attributed to
one stage, derived from the workflow's declaration (:meth:`conveyor.workflow.Workflow.stage_of`):

* ``review``: ``quarantined``, ``pending_review`` and ``pending_approval`` (waiting for a person);
* ``gate``: the status the validation gate reads (waiting for the gate);
* ``model``: a status whose next chain step an AI step writes (the declaration's ``ai_outputs``);
* ``approval``: the status before ``approved`` (waiting for a sign-off);
* ``publish``: every later step (waiting for the side effect: report, payment, archive).
"""

from __future__ import annotations

from enum import StrEnum

from conveyor import workflow as _workflow
from conveyor.workflow import Workflow


class Stage(StrEnum):
    """Where an item waits; the order is the order of a chain."""

    GATE = "gate"
    MODEL = "model"
    REVIEW = "review"
    APPROVAL = "approval"
    PUBLISH = "publish"


STAGES: tuple[Stage, ...] = tuple(Stage(s) for s in _workflow.STAGES)


def stage_of(workflow: Workflow, status: str) -> Stage | None:
    """The stage the time spent in ``status`` counts towards (None: not attributed, e.g. ``failed``)."""
    stage = workflow.stage_of(status)
    return Stage(stage) if stage is not None else None


def stage_map(workflow: Workflow) -> dict[str, str]:
    """Every attributed status of ``workflow`` -> its stage name (what the cycle-time SQL joins on)."""
    return workflow.stage_map()
