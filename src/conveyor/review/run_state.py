"""Where a run's review stands: what still waits for a person, and who decided what.

This is what :class:`~conveyor.review.sensors.HumanReviewSensor` reads to decide whether its run
can go on, and what it reports in its outcome (log and XCom summary).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from conveyor.ledger import run_waits
from conveyor.ledger.statuses import REVIEW_VALUES, UNRESOLVED_VALUES
from conveyor.ledger.store import Ledger


@dataclass
class RunReviewState:
    """The review state of one run of one workflow.

    :param pending: ids of items still waiting for a person (or corrected, not validated again).
    :param decisions: (actor, status the item went to) -> how many decisions.
    :param decided_items: ids of items that left review at least once and no longer wait.
    """

    workflow: str
    run_id: str
    pending: list[str] = field(default_factory=list)
    decisions: Counter[tuple[str, str]] = field(default_factory=Counter)
    decided_items: set[str] = field(default_factory=set)

    @property
    def by_actor(self) -> dict[str, int]:
        """Decisions per actor: ``reviewer:<name>`` for people, ``dag.task#try`` for escalations."""
        counts: Counter[str] = Counter()
        for (actor, _), n in self.decisions.items():
            counts[actor] += n
        return dict(sorted(counts.items()))

    @property
    def by_outcome(self) -> dict[str, int]:
        """Decisions per resulting status (``approved``, ``rejected``, ``validated``, ``received``...)."""
        counts: Counter[str] = Counter()
        for (_, to_status), n in self.decisions.items():
            counts[to_status] += n
        return dict(sorted(counts.items()))


def pending_count(ledger: Ledger, workflow: str, run_id: str) -> int:
    """How many items of the run still wait for a person or for revalidation (one indexed count)."""
    with ledger.connect() as conn:
        return run_waits.pending_count(conn, workflow, run_id, UNRESOLVED_VALUES)


def read_run_state(ledger: Ledger, workflow: str, run_id: str) -> RunReviewState:
    """The full review state of a run: pending items and every decision taken on its items."""
    state = RunReviewState(workflow=workflow, run_id=run_id)
    with ledger.connect() as conn:
        state.pending = run_waits.pending_ids(conn, workflow, run_id, UNRESOLVED_VALUES)
        moves = run_waits.moves_out_of(conn, workflow, run_id, REVIEW_VALUES)
    waiting = set(state.pending)
    for move in moves:
        state.decisions[(move.actor, move.to_status)] += 1
        if move.item_id not in waiting:
            state.decided_items.add(move.item_id)
    return state
