"""A workflow, declared once in Python next to its DAG, and stored in the ledger when it runs.

    from conveyor import Workflow

    INSPECTIONS = Workflow(
        name="site_inspections",
        chain=("received", "validated", "summarized", "approved", "published"),
        ai_outputs=("summarized",),
        source_field="site_id",
        review_card=("site_name", "inspector", "ai_result.risk", "ai_result.summary", "confidence"),
        priority_field="ai_result.risk_score",
        thresholds={"exception_rate_bound": 0.12},
    )

The chain is the happy path, in any status names; the side exits (``quarantined``,
``pending_review``, ``pending_approval``, ``rejected``, ``failed``, ``cancelled``) are reserved and
shared by every chain. From the chain the ledger derives the table of allowed transitions, and
monitoring which stage (gate, model, review, approval, publish) an item waits in.

The operators store the declaration in the ledger (:meth:`conveyor.ledger.Ledger.declare`) when
they run. A changed declaration is a new version; items keep the version they were received
under, so items in flight follow their own chain. The CLI, the API server, the triggerer and
``workflow_health`` read the declaration from the ledger and never import a DAG file.

Importing this module is free (the standard library only): DAG files do at parse time.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from conveyor.ledger.statuses import (
    DEFAULT_CHAIN,
    RESERVED,
    REVIEW_STATUSES,
    Status,
    valid_status_name,
)

#: How a review card shows a value.
FIELD_KINDS = ("text", "long", "label", "amount", "number", "percent", "date")
#: Item columns a review card may show besides payload and AI-result fields.
ITEM_FIELDS = ("confidence", "reason", "last_error", "business_key", "status", "run_id")

#: The stages of a cycle, in chain order (see :meth:`Workflow.stage_of`).
STAGES = ("gate", "model", "review", "approval", "publish")


@dataclass(frozen=True)
class ReviewField:
    """One field of an item's review card: what a reviewer sees in the queue without opening it.

    :param path: ``payload.<name>``, ``ai_result.<name>`` (dots go deeper), an item column
        (``confidence``, ``reason``...), or a bare name looked up in the payload, then the AI result.
    :param label: the column heading (default: the last part of the path).
    :param kind: ``text``, ``long`` (wrapped, e.g. a draft), ``label`` (a category), ``amount``,
        ``number``, ``percent`` (0..1 shown as %), or ``date``.
    """

    path: str
    label: str | None = None
    kind: str = "text"

    def __post_init__(self) -> None:
        if not self.path or self.path.startswith(".") or self.path.endswith("."):
            raise ValueError(f"invalid review-card path {self.path!r}")
        if self.kind not in FIELD_KINDS:
            raise ValueError(f"review-card field {self.path!r}: kind must be one of {', '.join(FIELD_KINDS)}")

    @classmethod
    def of(cls, spec: str | ReviewField | Mapping[str, Any]) -> ReviewField:
        if isinstance(spec, ReviewField):
            return spec
        if isinstance(spec, Mapping):
            return cls(**spec)
        kind = "percent" if spec == "confidence" else "text"
        return cls(path=spec, kind=kind)

    @property
    def heading(self) -> str:
        return self.label or self.path.rsplit(".", 1)[-1].replace("_", " ")

    def as_json(self) -> dict[str, Any]:
        return {"path": self.path, "label": self.heading, "kind": self.kind}


def _tuple(values: Sequence[Any] | str) -> tuple[Any, ...]:
    return (values,) if isinstance(values, str) else tuple(values)


@dataclass(frozen=True, eq=False)
class Workflow:
    """A workflow's declaration: its chain of statuses and what people and monitoring need to know.

    :param name: the workflow name: the DAG id by convention, and the first part of every item id
        (``<workflow>:<business key>``).
    :param chain: the happy path, first status to terminal status, in any lower-case names; the
        reserved side exits may not be used.
    :param description: one line shown on the review and health pages.
    :param source_field: the item field naming where an item comes from (a supplier, a vendor, a
        site): what the exception rate is broken down by.
    :param review_card: the fields each row of the review queue shows (``ReviewField`` or paths).
    :param priority_field: a numeric item field; the queue shows larger values first.
    :param ai_outputs: the chain statuses an AI step writes (time before them counts as model time).
    :param thresholds: this workflow's monitoring thresholds (``workflow_health``), over the defaults.
    :param version: the version the ledger stored this declaration as (None: not stored yet).
    """

    name: str
    chain: Sequence[str] = DEFAULT_CHAIN
    description: str = ""
    source_field: str | None = None
    review_card: Sequence[str | ReviewField] = ()
    priority_field: str | None = None
    ai_outputs: Sequence[str] = (Status.AI_PROCESSED,)
    thresholds: Mapping[str, Any] = field(default_factory=dict)
    version: int | None = None

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "chain", _tuple(self.chain))
        set_(self, "review_card", tuple(ReviewField.of(f) for f in _tuple(self.review_card)))
        set_(self, "ai_outputs", tuple(s for s in _tuple(self.ai_outputs) if s in self.chain))
        set_(self, "thresholds", dict(self.thresholds))
        if not self.name or not valid_status_name(self.name):
            raise ValueError(
                f"invalid workflow name {self.name!r}: use lower-case letters, digits and underscores"
            )
        if len(self.chain) < 2:
            raise ValueError(f"workflow {self.name!r}: a chain has at least two statuses")
        bad = [s for s in self.chain if not valid_status_name(s)]
        if bad:
            raise ValueError(f"workflow {self.name!r}: invalid status name {bad[0]!r}")
        reserved = [s for s in self.chain if s in RESERVED]
        if reserved:
            raise ValueError(
                f"workflow {self.name!r}: {reserved[0]!r} is a reserved side exit, not a chain step "
                f"(reserved: {', '.join(sorted(RESERVED))})"
            )
        if len(set(self.chain)) != len(self.chain):
            raise ValueError(f"workflow {self.name!r}: a chain visits each status once")

    # -- the chain ---------------------------------------------------------------------------

    @property
    def first(self) -> str:
        """Where items enter."""
        return self.chain[0]

    @property
    def done(self) -> str:
        """The status that counts as completed for throughput."""
        return self.chain[-1]

    @property
    def terminal(self) -> frozenset[str]:
        """Statuses an item never leaves."""
        return frozenset({self.chain[-1], Status.REJECTED, Status.CANCELLED})

    @property
    def gate_output(self) -> str:
        """The status a validation gate moves passing items to: ``validated`` when the chain has it."""
        return Status.VALIDATED if Status.VALIDATED in self.chain else self.chain[1]

    @property
    def gate_input(self) -> str:
        """The status a validation gate reads: the one just before :attr:`gate_output`."""
        return self.chain[self.chain.index(self.gate_output) - 1]

    @cached_property
    def transitions(self) -> frozenset[tuple[str, str]]:
        """Every allowed (from, to) pair."""
        allowed: set[tuple[str, str]] = set(zip(self.chain, self.chain[1:], strict=False))
        working = self.chain[:-1]
        # Any working step may need a person, fail, or be cancelled.
        for status in working:
            allowed.update((status, exit_) for exit_ in (*sorted(REVIEW_STATUSES), Status.FAILED, Status.CANCELLED))
        # A person's decision resumes the chain: quarantined input is re-gated or accepted (never
        # finished by the decision alone); a reviewed or approved item resumes after its step.
        allowed.update((Status.QUARANTINED, s) for s in working)
        for waiting in (Status.PENDING_REVIEW, Status.PENDING_APPROVAL):
            allowed.update((waiting, s) for s in self.chain[1:])
        for waiting in REVIEW_STATUSES:
            allowed.update({(waiting, Status.REJECTED), (waiting, Status.FAILED), (waiting, Status.CANCELLED)})
        # Corrected input is validated again: it passes to any later step of the chain (the gate's
        # output), or fails back to quarantined; it may also be rejected, failed or cancelled.
        allowed.add((Status.QUARANTINED, Status.CORRECTED))
        # An item the AI step gave no usable answer is sent back through its gate and AI step.
        allowed.add((Status.PENDING_REVIEW, Status.CORRECTED))
        allowed.add((Status.CORRECTED, Status.PENDING_REVIEW))  # that send-back undone by its reviewer
        allowed.update((Status.CORRECTED, s) for s in self.chain[1:-1])
        allowed.update(
            (Status.CORRECTED, s) for s in (Status.QUARANTINED, Status.REJECTED, Status.FAILED, Status.CANCELLED)
        )
        # A corrected item can come back to a person with the new reason.
        allowed.update({(Status.PENDING_REVIEW, Status.QUARANTINED), (Status.QUARANTINED, Status.PENDING_REVIEW)})
        allowed.update({(Status.FAILED, Status.PENDING_REVIEW), (Status.FAILED, Status.CANCELLED)})
        return frozenset(allowed)

    @property
    def card_fields(self) -> tuple[ReviewField, ...]:
        """The review card's fields, typed: ``__post_init__`` made every entry a :class:`ReviewField`."""
        return tuple(f for f in self.review_card if isinstance(f, ReviewField))

    @property
    def statuses(self) -> frozenset[str]:
        return frozenset(s for pair in self.transitions for s in pair)

    def allows(self, from_status: str, to_status: str) -> bool:
        return (from_status, to_status) in self.transitions

    def next_after(self, status: str) -> str:
        """The chain status that follows ``status`` (what an approval of that step resumes to)."""
        if status not in self.chain:
            raise ValueError(f"workflow {self.name!r}: {status!r} is not a step of its chain")
        position = self.chain.index(status)
        if position + 1 >= len(self.chain):
            raise ValueError(f"workflow {self.name!r}: {status!r} is the end of the chain")
        return self.chain[position + 1]

    def stage_of(self, status: str) -> str | None:
        """The stage the time spent in ``status`` counts towards (None: not attributed, e.g. ``failed``).

        ``review``: waiting for a person; ``gate``: the gate's input; ``model``: before a status an AI
        step writes; ``approval``: before ``approved``; ``publish``: every later step.
        """
        if status in REVIEW_STATUSES or status == Status.CORRECTED:
            return "review"
        if status not in self.chain or status == self.done:
            return None
        if status == self.gate_input:
            return "gate"
        following = self.next_after(status)
        if following in self.ai_outputs:
            return "model"
        if following == Status.APPROVED:
            return "approval"
        return "publish"

    def stage_map(self) -> dict[str, str]:
        """Every attributed status -> its stage (what the cycle-time SQL joins on)."""
        return {s: stage for s in sorted(self.statuses) if (stage := self.stage_of(s)) is not None}

    # -- storage -----------------------------------------------------------------------------

    def definition(self) -> dict[str, Any]:
        """The declaration as stored in the ledger (JSON; the version is not part of it)."""
        return {
            "name": self.name,
            "chain": list(self.chain),
            "description": self.description,
            "source_field": self.source_field,
            "review_card": [f.as_json() for f in self.card_fields],
            "priority_field": self.priority_field,
            "ai_outputs": list(self.ai_outputs),
            "thresholds": dict(self.thresholds),
        }

    @cached_property
    def digest(self) -> str:
        """sha256 of the canonical definition: equal declarations share one version."""
        text = json.dumps(self.definition(), sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    @classmethod
    def from_definition(cls, definition: Mapping[str, Any], version: int | None = None) -> Workflow:
        known = {"name", "chain", "description", "source_field", "review_card", "priority_field", "ai_outputs",
                 "thresholds"}
        return cls(**{k: v for k, v in definition.items() if k in known}, version=version)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Workflow) and self.digest == other.digest

    def __hash__(self) -> int:
        return hash(self.digest)

    def __repr__(self) -> str:
        version = f" v{self.version}" if self.version is not None else ""
        return f"Workflow({self.name!r}{version}: {' -> '.join(self.chain)})"
