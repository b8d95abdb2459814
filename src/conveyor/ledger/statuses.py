"""The status names the ledger reserves for every workflow, and the common chain.

A workflow's happy path is a chain of status names of its own choosing (see
:class:`conveyor.workflow.Workflow`). These side exits are the same in every chain and reserved,
so a chain can never use them:

* ``quarantined``: the item failed a validation gate; a person accepts, corrects or rejects it;
* ``pending_review``: a person must decide (doubtful AI output, an item a step could not handle);
* ``pending_approval``: a person must approve (a business rule, e.g. an amount over a threshold):
  an approval, not an exception, so the exception rate does not count it;
* ``corrected``: a reviewer corrected quarantined input; the run's review step validates it again
  with the gate that quarantined it (to the gate's output, or back to ``quarantined``);
* ``rejected``, ``failed``, ``cancelled``.

Importing this module is free (plain strings, no driver, no Airflow).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


class Status:
    """Names of the reserved side exits and of the common chain's steps (plain strings)."""

    RECEIVED = "received"
    VALIDATED = "validated"
    AI_PROCESSED = "ai_processed"
    APPROVED = "approved"
    PUBLISHED = "published"
    QUARANTINED = "quarantined"
    CORRECTED = "corrected"
    PENDING_REVIEW = "pending_review"
    PENDING_APPROVAL = "pending_approval"
    REJECTED = "rejected"
    FAILED = "failed"
    CANCELLED = "cancelled"


#: Statuses that put an item on the review queue.
REVIEW_STATUSES: frozenset[str] = frozenset({Status.QUARANTINED, Status.PENDING_REVIEW, Status.PENDING_APPROVAL})
#: Review statuses that count as exceptions (``pending_approval`` is a routine approval).
EXCEPTION_STATUSES: frozenset[str] = frozenset({Status.QUARANTINED, Status.PENDING_REVIEW})
#: Where an item stops without completing.
STOPPED_STATUSES: frozenset[str] = frozenset({Status.FAILED, Status.REJECTED, Status.CANCELLED})
#: Every name a chain may not use.
RESERVED: frozenset[str] = REVIEW_STATUSES | STOPPED_STATUSES | {Status.CORRECTED}

#: The common chain: what a workflow walks when it declares no chain of its own.
DEFAULT_CHAIN: tuple[str, ...] = (
    Status.RECEIVED,
    Status.VALIDATED,
    Status.AI_PROCESSED,
    Status.APPROVED,
    Status.PUBLISHED,
)

#: Review statuses in a stable order, as SQL parameters.
REVIEW_VALUES: list[str] = sorted(REVIEW_STATUSES)
#: What a review step waits for: items on the queue, and corrected items not validated again yet.
UNRESOLVED_VALUES: list[str] = sorted(REVIEW_STATUSES | {Status.CORRECTED})


def valid_status_name(name: str) -> bool:
    """A status name: lower-case letters, digits and underscores, starting with a letter."""
    return bool(name) and name[0].isalpha() and all(c.islower() or c.isdigit() or c == "_" for c in name)


def as_statuses(values: str | Iterable[str]) -> Sequence[str]:
    """One status or several, as a list of names (each checked for its spelling)."""
    items = [values] if isinstance(values, str) else list(values)
    for value in items:
        if not valid_status_name(str(value)):
            raise ValueError(f"invalid status name {value!r}: use lower-case letters, digits and underscores")
    return [str(v) for v in items]
