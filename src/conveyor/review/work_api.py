"""Routes for working the queue all day: bulk decisions and claims, under ``/conveyor/api/review``.

* ``POST   /decisions``: approve or reject many items with one comment, by ``item_ids`` or by
  ``filter`` (``workflow``, ``run_id``, ``status``: every item on the queue matching it). Each
  item gets its own guarded decision and audit row; the answer lists what was ``decided``, what
  someone else decided first (``already_decided``, with who and when), what is
  ``not_awaiting_review``, what is ``unknown`` and what is ``blocked`` (an approval would let it
  past its step's contract: each with what it needs). A filter decides every matching item, in
  rounds (``max_items`` caps it; ``remaining`` then counts what still matches). Every call wakes
  the runs' review steps at once. 403 when the user may not decide on one of the workflows named.
* ``POST   /items/{item_id}/claim``: claim an item while reviewing it (``[conveyor]
  review_claim_minutes``); renewing one's own claim is fine. 409 ``claimed`` naming the holder
  when another reviewer holds it: the claim is advice only, that reviewer may still decide;
  409 ``not_awaiting_review`` for an item no longer on the queue (nothing to claim).
* ``DELETE /items/{item_id}/claim``: release one's own claim.
* ``GET    /source/{item_id}``: the input row(s) the gate read for the item and what failed.

The reviewer is always the authenticated Airflow user; mutations take JSON bodies only.
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Depends, HTTPException, status
from pydantic import BaseModel, Field

from conveyor.ledger.errors import UnknownItem
from conveyor.ledger.statuses import REVIEW_STATUSES
from conveyor.review.api import BlockerOut, ClaimOut, QueueDep, conflict, require_json, workflow_of
from conveyor.review.auth import CurrentUser, permitted_workflows, require_dag_access
from conveyor.review.bulk import BULK_ACTIONS, QueueFilter
from conveyor.review.claims import ClaimHeld, ReviewClaims
from conveyor.review.errors import InvalidDecision, NotAwaitingReview

#: Most item ids one call may name.
MAX_IDS = 5_000


class FilterIn(BaseModel):
    """Every item on the queue matching this (workflows the user may decide on only)."""

    workflow: str | None = Field(default=None, max_length=200)
    run_id: str | None = Field(default=None, max_length=250)
    status: Literal["quarantined", "pending_review"] | None = None


class BulkDecisionIn(BaseModel):
    """One decision on many items; give ``item_ids`` or ``filter``."""

    action: Literal["approve", "reject"]
    comment: str | None = Field(default=None, max_length=4000)
    item_ids: list[str] | None = Field(default=None, max_length=MAX_IDS)
    filter: FilterIn | None = None
    #: with ``filter``: decide at most this many (default: every matching item)
    max_items: int | None = Field(default=None, ge=1, le=10_000_000)


class RefusedOut(BaseModel):
    item_id: str
    status: str | None
    decided_by: str | None = None
    decided_at: str | None = None


class DecidedOut(BaseModel):
    item_id: str
    from_status: str
    to_status: str
    #: whether its reviewer can take it back (``action: "undo"``): the page offers Undo only then
    undoable: bool = False


class BlockedOut(BaseModel):
    item_id: str
    blockers: list[BlockerOut]


class BulkDecisionOut(BaseModel):
    action: str
    actor: str
    comment: str | None
    decided: list[DecidedOut]
    already_decided: list[RefusedOut]
    not_awaiting_review: list[RefusedOut]
    unknown: list[str]
    #: items an approval would let past their step's contract: not moved, each with what it needs
    blocked: list[BlockedOut] = []
    #: with ``max_items``: items still matching the filter, not decided by this call
    remaining: int = 0


def create_router() -> APIRouter:
    """The bulk-decision and claim routes (mounted under ``/api/review`` of the Conveyor app)."""
    router = APIRouter(prefix="/api/review", tags=["Conveyor review"])

    @router.post("/decisions", response_model=BulkDecisionOut, dependencies=[Depends(require_json)])
    def decide_many(body: BulkDecisionIn, queue: QueueDep, user: CurrentUser) -> dict[str, Any]:
        """Approve or reject many items, each with its own guarded decision and audit row."""
        if (body.item_ids is None) == (body.filter is None):
            raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, "give either item_ids or filter")
        if body.action not in BULK_ACTIONS:  # pragma: no cover - Literal checks it
            raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, f"unknown action {body.action!r}")
        where = None
        if body.item_ids is not None:
            for workflow in sorted({workflow_of(i) for i in body.item_ids}):
                require_dag_access(user, workflow, "PUT")
        else:
            assert body.filter is not None
            if body.filter.workflow:
                require_dag_access(user, body.filter.workflow, "PUT")
                workflows = [body.filter.workflow]
            else:
                workflows = sorted(permitted_workflows(user, queue.workflows(), "PUT"))
            where = QueueFilter(workflows, run_id=body.filter.run_id or None, status=body.filter.status)
        try:
            outcome = queue.decide_many(
                body.item_ids, body.action, reviewer=user.get_name(), comment=body.comment, where=where,
                max_items=body.max_items,
            )
        except InvalidDecision as exc:
            raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, str(exc)) from None
        return outcome.as_json()

    @router.post(
        "/items/{item_id:path}/claim",
        response_model=ClaimOut,
        dependencies=[Depends(require_json)],
        responses={409: {"description": "another reviewer holds the item; the answer names them"}},
    )
    def claim(item_id: str, queue: QueueDep, user: CurrentUser) -> ClaimOut:
        """Claim an item while reviewing it (or renew one's own claim); only reviewers who may decide."""
        require_dag_access(user, workflow_of(item_id), "PUT")
        try:
            item = queue.ledger.get(item_id)
            if item.status not in REVIEW_STATUSES:
                # A decided item (opened from a link or a search) is read, not claimed: a claim
                # would tell others someone is on an item nobody needs to look at.
                raise NotAwaitingReview(item_id, item.status)
            held = ReviewClaims(queue.ledger).claim(item_id, user.get_name())
        except UnknownItem as exc:
            raise HTTPException(status.HTTP_404_NOT_FOUND, str(exc)) from None
        except NotAwaitingReview as exc:
            raise conflict("not_awaiting_review", exc, status=exc.status) from None
        except ClaimHeld as exc:
            held = exc.claim
            raise conflict(
                "claimed", exc, reviewer=held.reviewer, claimed_at=held.claimed_at, expires_at=held.expires_at
            ) from None
        return ClaimOut(**held.__dict__, mine=True)

    @router.delete("/items/{item_id:path}/claim")
    def release(item_id: str, queue: QueueDep, user: CurrentUser) -> dict[str, int]:
        """Release one's own claim on an item (others' claims stay)."""
        require_dag_access(user, workflow_of(item_id), "GET")
        return {"released": ReviewClaims(queue.ledger, minutes=1).release([item_id], user.get_name())}

    @router.get("/source/{item_id:path}")
    def source(item_id: str, queue: QueueDep, user: CurrentUser) -> dict[str, Any]:
        """The input rows the gate read for the item (its row as read and what failed), newest first."""
        from conveyor.ledger import gate_results

        require_dag_access(user, workflow_of(item_id), "GET")
        with queue.ledger.connect() as conn:
            findings = gate_results.for_item(conn, item_id)
        keep = ("run_id", "step", "row_key", "row_number", "outcome", "failures", "row_data", "suite", "created_at")
        rows = [{k: f.get(k) for k in keep} for f in findings]  # newest first
        return {"item_id": item_id, "findings": rows}

    return router
