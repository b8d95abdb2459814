"""Item statuses and the transition table of every workflow, in one place.

Every workflow walks a chain of steps. The common chain is
``received -> validated -> ai_processed -> approved -> published``; a workflow with more steps
declares its own chain once (see ``INVOICE_CHAIN``) from the same kinds of step. The side exits
are the same for every chain:

* ``quarantined``: the item failed the validation gate (from the status the gate reads);
* ``pending_review``: a person must decide (doubtful AI output, an approval threshold);
* ``rejected``, ``failed``, ``cancelled``.

A reviewer's approval moves a ``pending_review`` item on to the status recorded as its review
target when it was routed, so one review queue serves every step of every chain.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property

from conveyor.ledger.errors import UnknownWorkflow


class Status(StrEnum):
    """Every status an item can hold, in any workflow."""

    RECEIVED = "received"
    EXTRACTED = "extracted"
    VALIDATED = "validated"
    CLASSIFIED = "classified"
    AI_PROCESSED = "ai_processed"
    APPROVED = "approved"
    PAID = "paid"
    PUBLISHED = "published"
    ARCHIVED = "archived"
    QUARANTINED = "quarantined"
    PENDING_REVIEW = "pending_review"
    REJECTED = "rejected"
    FAILED = "failed"
    CANCELLED = "cancelled"


#: Statuses that put an item on the review queue.
REVIEW_STATUSES: frozenset[Status] = frozenset({Status.QUARANTINED, Status.PENDING_REVIEW})

DEFAULT_CHAIN: tuple[Status, ...] = (
    Status.RECEIVED,
    Status.VALIDATED,
    Status.AI_PROCESSED,
    Status.APPROVED,
    Status.PUBLISHED,
)

INVOICE_CHAIN: tuple[Status, ...] = (
    Status.RECEIVED,
    Status.EXTRACTED,
    Status.VALIDATED,
    Status.CLASSIFIED,
    Status.APPROVED,
    Status.PAID,
    Status.ARCHIVED,
)


@dataclass(frozen=True)
class Workflow:
    """A workflow's chain of statuses and the transition table derived from it.

    :param name: the workflow name, the first part of every item id (``<workflow>:<key>``).
    :param chain: the happy path, first status to terminal status.
    """

    name: str
    chain: tuple[Status, ...] = DEFAULT_CHAIN
    _extra: frozenset[tuple[Status, Status]] = field(default=frozenset(), repr=False)

    def __post_init__(self) -> None:
        if not self.chain or self.chain[0] != Status.RECEIVED or Status.VALIDATED not in self.chain:
            raise ValueError(f"workflow {self.name!r}: a chain starts at 'received' and passes 'validated'")
        if len(set(self.chain)) != len(self.chain):
            raise ValueError(f"workflow {self.name!r}: a chain visits each status once")

    @property
    def terminal(self) -> frozenset[Status]:
        """Statuses an item never leaves."""
        return frozenset({self.chain[-1], Status.REJECTED, Status.CANCELLED})

    @property
    def done(self) -> Status:
        """The status that counts as completed for throughput."""
        return self.chain[-1]

    @property
    def gate_input(self) -> Status:
        """The status the validation gate reads (the one just before ``validated``)."""
        return self.chain[self.chain.index(Status.VALIDATED) - 1]

    @cached_property
    def transitions(self) -> frozenset[tuple[Status, Status]]:
        """Every allowed (from, to) pair."""
        allowed: set[tuple[Status, Status]] = set(self._extra)
        allowed.update(zip(self.chain, self.chain[1:], strict=False))
        non_terminal = [s for s in self.chain if s not in self.terminal]
        # The gate quarantines bad input; a reviewer accepts it, sends a correction back, or rejects it.
        allowed.add((self.gate_input, Status.QUARANTINED))
        allowed.update({
            (Status.QUARANTINED, Status.VALIDATED),
            (Status.QUARANTINED, self.gate_input),
            (Status.QUARANTINED, Status.REJECTED),
        })
        # Any working step may need a person; approval resumes the chain after that step.
        allowed.update((s, Status.PENDING_REVIEW) for s in non_terminal)
        allowed.update((Status.PENDING_REVIEW, s) for s in self.chain[1:])
        allowed.add((Status.PENDING_REVIEW, Status.REJECTED))
        # Failures and cancellation from anywhere that is not finished.
        for s in [*non_terminal, Status.QUARANTINED, Status.PENDING_REVIEW]:
            allowed.add((s, Status.FAILED))
            allowed.add((s, Status.CANCELLED))
        allowed.update({(Status.FAILED, Status.PENDING_REVIEW), (Status.FAILED, Status.CANCELLED)})
        return frozenset(allowed)

    @property
    def statuses(self) -> frozenset[Status]:
        return frozenset(s for pair in self.transitions for s in pair)

    def allows(self, from_status: str, to_status: str) -> bool:
        return (Status(from_status), Status(to_status)) in self.transitions

    def next_after(self, status: str) -> Status:
        """The chain status that follows ``status`` (what an approval of that step resumes to)."""
        position = self.chain.index(Status(status))
        if position + 1 >= len(self.chain):
            raise ValueError(f"workflow {self.name!r}: {status!r} is the end of the chain")
        return self.chain[position + 1]


_WORKFLOWS: dict[str, Workflow] = {}


def register_workflow(workflow: Workflow) -> Workflow:
    """Declare a workflow's chain once; later declarations of the same name must agree."""
    known = _WORKFLOWS.get(workflow.name)
    if known is not None and known != workflow:
        raise ValueError(f"workflow {workflow.name!r} is already declared with another chain")
    _WORKFLOWS[workflow.name] = workflow
    return workflow


def get_workflow(name: str) -> Workflow:
    """The declared workflow, or the common chain for a workflow that declared none."""
    if not name or ":" in name:
        raise UnknownWorkflow(f"invalid workflow name {name!r}")
    return _WORKFLOWS.get(name) or Workflow(name=name)


def parse_status(value: str) -> Status:
    """A status from user input, with an error that lists the valid ones."""
    try:
        return Status(value)
    except ValueError:
        valid = ", ".join(s.value for s in Status)
        raise ValueError(f"unknown status {value!r}; valid statuses: {valid}") from None


def as_statuses(values: str | Iterable[str]) -> Sequence[Status]:
    items = [values] if isinstance(values, str) else list(values)
    return [parse_status(v) for v in items]


register_workflow(Workflow(name="supplier_exceptions", chain=DEFAULT_CHAIN))
register_workflow(Workflow(name="invoice_processing", chain=INVOICE_CHAIN))
