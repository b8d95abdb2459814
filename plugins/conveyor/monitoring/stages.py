"""Which stage of a workflow the time an item spends in each status belongs to.

An item's cycle time (entry to completion) is the sum of the times it spent in each status. To say
whether the model or the review queue is the bottleneck, every status of a chain is attributed to
one stage, derived from the chain itself so a new workflow needs no extra declaration:

* ``review``: ``quarantined`` and ``pending_review`` (waiting for a person);
* ``gate``: the status the validation gate reads (waiting for the gate);
* ``model``: a status whose next chain step is produced by an AI step (waiting for the model);
* ``approval``: the status before ``approved`` (waiting for a sign-off);
* ``publish``: every later step (waiting for the side effect: report, payment, archive).
"""

from __future__ import annotations

from enum import StrEnum

from conveyor.ledger.statuses import REVIEW_STATUSES, Status, Workflow

#: Statuses an AI step writes: time spent in the status before one of them is model time.
AI_OUTPUTS: frozenset[Status] = frozenset({Status.AI_PROCESSED, Status.EXTRACTED, Status.CLASSIFIED})


class Stage(StrEnum):
    """Where an item waits; the order is the order of a chain."""

    GATE = "gate"
    MODEL = "model"
    REVIEW = "review"
    APPROVAL = "approval"
    PUBLISH = "publish"


STAGES: tuple[Stage, ...] = tuple(Stage)


def stage_of(workflow: Workflow, status: str) -> Stage | None:
    """The stage the time spent in ``status`` counts towards (None: not attributed, e.g. ``failed``).

    :param workflow: the workflow whose chain gives the status its meaning.
    :param status: a status of that workflow.
    """
    current = Status(status)
    if current in REVIEW_STATUSES:
        return Stage.REVIEW
    if current == workflow.gate_input:
        return Stage.GATE
    if current not in workflow.chain or current == workflow.done:
        return None
    following = workflow.next_after(current)
    if following in AI_OUTPUTS:
        return Stage.MODEL
    if following == Status.APPROVED:
        return Stage.APPROVAL
    return Stage.PUBLISH


def stage_map(workflow: Workflow) -> dict[str, str]:
    """Every attributed status of ``workflow`` -> its stage name (what the cycle-time SQL joins on)."""
    mapping: dict[str, str] = {}
    for status in workflow.statuses:
        stage = stage_of(workflow, status)
        if stage is not None:
            mapping[status.value] = stage.value
    return mapping
