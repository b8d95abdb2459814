"""The review queue over HTTP, served by the Airflow API server under ``/conveyor/api/review``.

Routes (every one behind Airflow's authentication, see :mod:`conveyor.review.auth`):

* ``GET  /queue?workflow=&run_id=&status=&limit=&offset=``: one page of the queue;
* ``GET  /items/{item_id}``: an item with its history and the decisions open to it;
* ``GET  /search?q=``: where is item X (exact item id or business key);
* ``POST /items/{item_id}/decision``: approve, reject or correct; the reviewer is the
  authenticated user. 409 when someone decided first (the answer says who) or the item is not
  awaiting review. A correction is ``{"action": "correct", "changes": {field: value, ...},
  "comment": ...}``: the fields are merged into the quarantined item's input (it goes to
  ``corrected``, validated again by its run) or into the pending item's AI answer (checked against
  the AI task's output schema and rule checks: 422 with every problem when it fails; approved
  onward when it passes). ``payload`` is the older name of ``changes``. The field-level diff is in
  the history's ``detail``. An approval that would let the item past its step's contract (a hard
  check failed, no AI answer, a refused effect) is a 409 ``approval_blocked`` whose ``blockers``
  name each field, what it needs and the decisions that apply instead (``correct``, ``retry_ai``,
  ``retry_effect``, ``done_elsewhere`` with a ``reference``, ``reject``).

Mutations are POST only and take a JSON body (a cross-site form cannot send one).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query, Request, status
from pydantic import BaseModel, Field

from conveyor.ledger.errors import LedgerUnavailable, UnknownItem
from conveyor.ledger.store import Item, TransitionRecord
from conveyor.review.auth import CurrentUser, permitted_workflows, require_dag_access
from conveyor.review.cards import checks_of
from conveyor.review.claims import ReviewClaims
from conveyor.review.errors import ApprovalBlocked, DecisionConflict, InvalidDecision, NotAwaitingReview
from conveyor.review.review_queue import MAX_PAGE, Action, ReviewQueue
from conveyor.review.undo import undoable

#: Largest offset a page of the queue takes (PostgreSQL's OFFSET is a bigint; no queue is longer).
MAX_OFFSET = 1_000_000_000

# -- response and request bodies -------------------------------------------------------------


class ItemOut(BaseModel):
    """An item as the ledger holds it."""

    item_id: str
    workflow: str
    business_key: str
    run_id: str
    status: str
    payload: dict[str, Any]
    ai_result: Any = None
    confidence: float | None = None
    reason: str | None = None
    last_error: str | None = None
    review_target: str | None = None
    priority: int
    attempts: int
    stage_times: dict[str, Any]
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, item: Item) -> ItemOut:
        fields = {name: getattr(item, name) for name in cls.model_fields}
        return cls(**fields)


class CardFieldOut(BaseModel):
    """One field of the item's review card (declared by its workflow)."""

    label: str
    kind: str
    value: Any = None
    path: str


class ClaimOut(BaseModel):
    """Who has the item open on the review page, until when."""

    item_id: str
    reviewer: str
    claimed_at: datetime
    expires_at: datetime
    #: the claim is the requesting user's own
    mine: bool = False


class BlockerOut(BaseModel):
    """Why an item cannot be approved as it is: the field, what it needs, the decisions that apply."""

    code: str
    field: str | None
    need: str
    actions: list[str]


class FormFieldOut(BaseModel):
    """One field of the correction form: its type, value, and whether a check names it."""

    name: str
    kind: str
    value: Any = None
    choices: list[str] = []
    failing: bool = False
    hint: str | None = None


class QueueEntryOut(ItemOut):
    waiting_since: datetime
    age_seconds: float
    #: the workflow's review card, resolved from its stored declaration
    card: list[CardFieldOut] = []
    #: the failed checks or doubts, one plain sentence each
    checks: list[str] = []
    #: the value of the workflow's priority field (what the queue is ordered by after ``priority``)
    priority_value: float | None = None
    #: a live claim by a reviewer, if any
    claim: ClaimOut | None = None
    #: what stands in the way of approving it as it is (the page disables Approve and says why)
    blockers: list[BlockerOut] = []


class QueueOut(BaseModel):
    items: list[QueueEntryOut]
    total: int
    limit: int
    offset: int
    #: workflows with items waiting that the user may read (for the page's filter)
    workflows: list[str]


class TransitionOut(BaseModel):
    from_status: str | None
    to_status: str
    at: datetime
    actor: str
    reason: str | None
    #: what the move recorded: a correction's ``changes`` (field, before, after), the model's
    #: answer a reviewer corrected (``model_answer``), the gate that quarantined the item
    detail: dict[str, Any] | None = None

    @classmethod
    def of(cls, record: TransitionRecord) -> TransitionOut:
        return cls(
            from_status=record.from_status,
            to_status=record.to_status,
            at=record.at,
            actor=record.actor,
            reason=record.reason,
            detail=record.detail if isinstance(record.detail, dict) else None,
        )


class ItemViewOut(BaseModel):
    item: ItemOut
    history: list[TransitionOut]
    awaiting_review: bool
    actions: list[str]
    approve_to: str | None
    last_decision: TransitionOut | None
    #: the user may decide on this item (PUT on its DAG)
    can_decide: bool
    #: what stands in the way of approving it as it is (empty: an approval may go ahead)
    blockers: list[BlockerOut] = []
    #: the fields a correction may change (the page's form; empty: no correction applies)
    form: list[FormFieldOut] = []


class SearchOut(BaseModel):
    query: str
    items: list[ItemOut]


class DecisionIn(BaseModel):
    """A reviewer's decision; the reviewer is the authenticated user."""

    action: Action
    comment: str | None = Field(default=None, max_length=4000)
    #: ``action = "correct"`` only: the corrected fields, merged into the quarantined input or
    #: into the pending item's AI answer
    changes: dict[str, Any] | None = None
    #: the older name of ``changes`` (merged too)
    payload: dict[str, Any] | None = None
    #: ``action = "done_elsewhere"`` only: where the refused effect was done (a payment reference)
    reference: str | None = Field(default=None, max_length=500)


class DecisionOut(BaseModel):
    item_id: str
    action: str
    from_status: str
    to_status: str
    actor: str
    comment: str | None
    item: ItemOut
    #: whether its reviewer can take it back (``action: "undo"``): the page offers Undo only then
    undoable: bool = False


# -- dependencies ----------------------------------------------------------------------------


def get_queue() -> ReviewQueue:
    """The review queue over the ledger connection ``conveyor_ledger`` (the process's pooled connections)."""
    from conveyor.ledger.hook import LedgerHook

    try:
        # The API answers a person at once: a 503 with Retry-After rather than a wait on a restart.
        return ReviewQueue(LedgerHook(application_name="conveyor-api", reconnect_seconds=0).get_ledger())
    except LedgerUnavailable as exc:
        from conveyor.review.webapp import RETRY_AFTER_SECONDS

        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE, str(exc), headers={"Retry-After": str(RETRY_AFTER_SECONDS)}
        ) from None


QueueDep = Annotated[ReviewQueue, Depends(get_queue)]


def require_json(request: Request) -> None:
    """Mutations take a JSON body only: 415 otherwise (a cross-site HTML form cannot send JSON)."""
    content_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if content_type != "application/json":
        raise HTTPException(status.HTTP_415_UNSUPPORTED_MEDIA_TYPE, "send the decision as application/json")


def conflict(code: str, exc: Exception, **detail: Any) -> HTTPException:
    """The 409 of a race lost or a state moved on (someone decided or claimed first; not awaiting
    review): ``{"code": code, "message": str(exc), **detail}``, datetimes as ISO 8601.

    :param code: what happened first (``already_decided``, ``claimed``, ``not_awaiting_review``).
    :param exc: the error; its message is the body's ``message``.
    :param detail: the rest of the body (who, when, the item's status), in this order.
    """
    body: dict[str, Any] = {"code": code, "message": str(exc)}
    body.update((k, v.isoformat() if isinstance(v, datetime) else v) for k, v in detail.items())
    return HTTPException(status.HTTP_409_CONFLICT, body)


def workflow_of(item_id: str) -> str:
    """The workflow named by an item id (``<workflow>:<business key>``); 404 for a malformed id."""
    workflow, sep, key = item_id.partition(":")
    if not sep or not workflow or not key:
        raise HTTPException(
            status.HTTP_404_NOT_FOUND, f"unknown item {item_id!r}: item ids are <workflow>:<key>"
        )
    return workflow


# -- routes ----------------------------------------------------------------------------------


def create_router() -> APIRouter:
    """The review API router (mounted under ``/api/review`` of the Conveyor app)."""
    router = APIRouter(prefix="/api/review", tags=["Conveyor review"])

    @router.get("/queue", response_model=QueueOut)
    def list_queue(
        queue: QueueDep,
        user: CurrentUser,
        workflow: Annotated[str | None, Query(max_length=200)] = None,
        run_id: Annotated[str | None, Query(max_length=250)] = None,
        review_status: Annotated[str | None, Query(alias="status")] = None,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
        offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
    ) -> QueueOut:
        """One page of the review queue: highest priority first, then oldest first."""
        visible = sorted(permitted_workflows(user, queue.workflows()))
        if workflow:
            require_dag_access(user, workflow, "GET")
            wanted = [workflow]
        else:
            wanted = visible
        try:
            page = queue.list(
                workflows=wanted, run_id=run_id or None, status=review_status, limit=limit, offset=offset
            )
        except ValueError as exc:
            raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, str(exc)) from None
        claims = ReviewClaims(queue.ledger, minutes=1).live([e.item.item_id for e in page.entries])
        blocked = queue.blockers([e.item for e in page.entries])
        me = user.get_name()
        items = [
            QueueEntryOut(
                **ItemOut.of(e.item).model_dump(),
                waiting_since=e.waiting_since,
                age_seconds=e.age_seconds,
                card=[CardFieldOut(**f.as_json()) for f in queue.card(e.item)],
                checks=checks_of(e.item),
                priority_value=e.priority_value,
                claim=ClaimOut(**claims[c].__dict__, mine=claims[c].reviewer == me)
                if (c := e.item.item_id) in claims
                else None,
                blockers=[BlockerOut(**b.as_json()) for b in blocked.get(e.item.item_id, [])],
            )
            for e in page.entries
        ]
        return QueueOut(
            items=items, total=page.total, limit=page.limit, offset=page.offset, workflows=visible
        )

    @router.get("/search", response_model=SearchOut)
    def search(
        queue: QueueDep, user: CurrentUser, q: Annotated[str, Query(min_length=1, max_length=300)]
    ) -> SearchOut:
        """Where is item X: items whose id or business key is ``q``, in workflows the user may read."""
        found = queue.search(q, limit=50)
        allowed = permitted_workflows(user, {i.workflow for i in found})
        return SearchOut(query=q, items=[ItemOut.of(i) for i in found if i.workflow in allowed][:20])

    @router.get("/items/{item_id:path}", response_model=ItemViewOut)
    def read_item(item_id: str, queue: QueueDep, user: CurrentUser) -> ItemViewOut:
        """An item with its history and the decisions open to it."""
        workflow = workflow_of(item_id)
        require_dag_access(user, workflow, "GET")
        try:
            view = queue.view(item_id)
        except UnknownItem as exc:
            raise HTTPException(status.HTTP_404_NOT_FOUND, str(exc)) from None
        return ItemViewOut(
            item=ItemOut.of(view.item),
            history=[TransitionOut.of(r) for r in view.history],
            awaiting_review=view.awaiting_review,
            actions=[a.value for a in view.actions],
            approve_to=view.approve_to,
            last_decision=TransitionOut.of(view.last_decision) if view.last_decision else None,
            can_decide=view.awaiting_review and workflow in permitted_workflows(user, [workflow], "PUT"),
            blockers=[BlockerOut(**b.as_json()) for b in view.blockers],
            form=[FormFieldOut(**f.as_json()) for f in view.form],
        )

    @router.post(
        "/items/{item_id:path}/decision",
        response_model=DecisionOut,
        dependencies=[Depends(require_json)],
        responses={409: {"description": "decided by someone else first, or not awaiting review"}},
    )
    def decide(item_id: str, body: DecisionIn, queue: QueueDep, user: CurrentUser) -> DecisionOut:
        """Approve, reject, or correct and re-submit an item, as the authenticated reviewer."""
        workflow = workflow_of(item_id)
        require_dag_access(user, workflow, "PUT")
        try:
            result = queue.decide(
                item_id,
                body.action,
                reviewer=user.get_name(),
                comment=body.comment,
                changes=body.changes,
                payload=body.payload,
                reference=body.reference,
            )
        except UnknownItem as exc:
            raise HTTPException(status.HTTP_404_NOT_FOUND, str(exc)) from None
        except ApprovalBlocked as exc:
            raise conflict("approval_blocked", exc, blockers=[b.as_json() for b in exc.blockers]) from None
        except DecisionConflict as exc:
            raise conflict(
                "already_decided", exc, status=exc.status, decided_by=exc.decided_by, decided_at=exc.decided_at
            ) from None
        except NotAwaitingReview as exc:
            raise conflict("not_awaiting_review", exc, status=exc.status) from None
        except (InvalidDecision, ValueError) as exc:
            raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, str(exc)) from None
        return DecisionOut(
            item_id=result.item_id,
            action=result.action.value,
            from_status=result.from_status,
            to_status=result.to_status,
            actor=result.actor,
            comment=result.comment,
            item=ItemOut.of(queue.ledger.get(item_id)),
            undoable=undoable(result.action.value, result.from_status, result.to_status),
        )

    return router
