"""Fixtures of the review tests: items routed to review in the real ledger (the real API server
with simple-auth users and real tokens is the session's, see tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Sequence

from conveyor.ledger import Ledger, NewItem
from conveyor.ledger.statuses import Status
from conveyor.ledger.store import ItemUpdate


def route_to_review(
    ledger: Ledger,
    workflow: str,
    run_id: str,
    *,
    pending: Sequence[str] = (),
    quarantined: Sequence[str] = (),
    validated: Sequence[str] = (),
    payloads: dict[str, dict] | None = None,
    priorities: dict[str, int] | None = None,
) -> None:
    """Receive items and route them as the gate and the AI step would.

    ``pending`` items go received -> validated -> pending_review (review target ai_processed, with a
    model output and confidence); ``quarantined`` items fail the gate; ``validated`` pass it.
    """
    payloads = payloads or {}
    priorities = priorities or {}
    keys = [*pending, *quarantined, *validated]
    ledger.receive(
        workflow,
        run_id,
        [NewItem(k, payloads.get(k, {"key": k, "amount": 100}), priority=priorities.get(k, 0)) for k in keys],
        actor="test.extract#1",
    )
    ids = lambda ks: [f"{workflow}:{k}" for k in ks]  # noqa: E731
    flow = ledger.workflow(workflow)
    to_validated = flow.chain[1 : flow.chain.index(Status.VALIDATED) + 1]
    for step in to_validated:
        # quarantined items stop at the gate's input; the others pass the gate.
        moving = [*pending, *validated] if step == Status.VALIDATED else keys
        if moving:
            ledger.transition(
                workflow, ids(moving), to_status=step, actor="test.step#1", from_status=_previous(flow, step)
            )
        if quarantined and step == flow.gate_input:
            ledger.transition(
                workflow,
                ids(quarantined),
                to_status="quarantined",
                actor="test.gate#1",
                from_status=step,
                reason="expect_column_values_to_not_be_null: supplier_id is null",
            )
    if quarantined and flow.gate_input == Status.RECEIVED:
        ledger.transition(
            workflow,
            ids(quarantined),
            to_status="quarantined",
            actor="test.gate#1",
            from_status="received",
            reason="expect_column_values_to_not_be_null: supplier_id is null",
        )
    if pending:
        ledger.transition(
            workflow,
            {
                i: ItemUpdate(
                    reason="confidence 0.41 below 0.80",
                    ai_result={"category": "late delivery", "summary": "maybe"},
                    confidence=0.41,
                    review_target=flow.next_after(Status.VALIDATED),
                )
                for i in ids(pending)
            },
            to_status="pending_review",
            actor="test.ai#1",
            from_status="validated",
        )


def _previous(flow, step):
    return flow.chain[flow.chain.index(step) - 1]
