"""Escalation per item age: an item that waits too long for a person is escalated on its own.

A review step's ``timeout`` and ``escalation`` act on the whole run. ``item_timeout`` and
``item_escalation`` act on each item: once an item has waited ``item_timeout`` on the queue
(since it entered ``quarantined`` or ``pending_review``), the step

* ``alert``: tells a person which items wait, for how long and where to decide them (every
  configured alert channel); the items keep waiting;
* ``reject``: moves them to ``rejected`` with the reason;
* ``fail``: fails the step (no retry), naming them; its failure callback alerts a person.

Each escalation is recorded in ``conveyor.review_escalations`` (item, step, the wait it ended): an
item is escalated once per wait, whichever attempt of the step gets there first, and an item that
comes back to the queue (a correction that fails again) is escalated anew after a new wait.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from conveyor.errors import ReviewError
from conveyor.ledger import review_escalations
from conveyor.ledger.review_escalations import OverdueItem
from conveyor.ledger.statuses import REVIEW_VALUES, Status

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from conveyor.ledger.store import Ledger

_REVIEW_VALUES: list[str] = REVIEW_VALUES


class ItemEscalation(StrEnum):
    """What a review step does with an item that waited longer than its ``item_timeout``."""

    ALERT = "alert"
    REJECT = "reject"
    FAIL = "fail"


def overdue_items(
    ledger: Ledger, *, workflow: str, run_id: str, step: str, item_timeout: float, now: datetime | None = None
) -> list[OverdueItem]:
    """Items of the run that have waited at least ``item_timeout`` seconds, not yet escalated by ``step``."""
    now = now or datetime.now(UTC)
    cutoff = now - timedelta(seconds=item_timeout)
    with ledger.connect() as conn:
        return review_escalations.overdue(
            conn, workflow=workflow, run_id=run_id, step=step, statuses=_REVIEW_VALUES, cutoff=cutoff
        )


def escalate_items(
    ledger: Ledger,
    *,
    workflow: str,
    run_id: str,
    step: str,
    item_timeout: float,
    action: ItemEscalation,
    actor: str,
    notify: Any = None,
    context: Mapping[str, Any] | None = None,
    now: datetime | None = None,
) -> list[OverdueItem]:
    """Escalate the run's overdue items once each; return the ones this call escalated.

    :param notify: ``(subject, text, context) -> channels`` that tells a person (default
        :func:`conveyor.monitoring.notifiers.notify_people`); used by ``alert``.
    :raises ItemsOverdue: ``action`` is ``fail`` and items are overdue (nothing is recorded, so a
        cleared step finds them again).
    :raises conveyor.monitoring.notifiers.ChannelNotConfigured: ``alert`` with no channel to reach
        anyone (nothing is recorded: the next look tries again).
    """
    now = now or datetime.now(UTC)
    overdue = overdue_items(
        ledger, workflow=workflow, run_id=run_id, step=step, item_timeout=item_timeout, now=now
    )
    if not overdue:
        return []
    if action is ItemEscalation.FAIL:
        raise ItemsOverdue(describe(overdue, workflow=workflow, run_id=run_id, item_timeout=item_timeout,
                                    now=now, action=action))  # fmt: skip
    if action is ItemEscalation.REJECT:
        result = ledger.transition(
            workflow,
            [o.item_id for o in overdue],
            to_status=Status.REJECTED,
            from_status=_REVIEW_VALUES,  # decided meanwhile: the person's decision stands
            actor=actor,
            reason=f"waited more than {_human(item_timeout)} for a person: rejected by the review step's "
            "item escalation",
        )
        moved = set(result.moved)
        mine = [o for o in overdue if o.item_id in moved]
    else:
        if notify is None:
            from conveyor.monitoring.notifiers import notify_people as notify
        mine = list(overdue)
        subject = f"[Conveyor] {workflow}: {len(mine)} item(s) waited more than {_human(item_timeout)} for review"
        # Sent before it is recorded: a message that reached nobody does not count as an escalation
        # (the next look sends it again), and a crash in between repeats the message, never loses it.
        notify(subject, describe(mine, workflow=workflow, run_id=run_id, item_timeout=item_timeout,
                                 now=now, action=action), dict(context or {}))  # fmt: skip
    if mine:
        _record(ledger, mine, workflow=workflow, run_id=run_id, step=step, action=action)
    return mine


def _record(
    ledger: Ledger, items: Sequence[OverdueItem], *, workflow: str, run_id: str, step: str, action: ItemEscalation
) -> None:
    with ledger.connect() as conn:
        review_escalations.record(conn, items, workflow=workflow, run_id=run_id, step=step, action=action.value)


class ItemsOverdue(ReviewError, RuntimeError):
    """Items waited longer than the step's ``item_timeout`` and its item escalation is ``fail``."""


def describe(
    items: Sequence[OverdueItem],
    *,
    workflow: str,
    run_id: str,
    item_timeout: float,
    now: datetime,
    action: ItemEscalation,
) -> str:
    """What a person reads: which items wait, how long, why, and where to decide them."""
    head = {
        ItemEscalation.ALERT: f"{len(items)} item(s) of {workflow}, run {run_id}, have waited more than "
        f"{_human(item_timeout)} for a person and still wait:",
        ItemEscalation.REJECT: f"{len(items)} item(s) of {workflow}, run {run_id}, waited more than "
        f"{_human(item_timeout)} for a person and were rejected:",
        ItemEscalation.FAIL: f"item escalation 'fail': {len(items)} item(s) of {workflow}, run {run_id}, waited "
        f"more than {_human(item_timeout)} for a person:",
    }[action]
    lines = [head]
    for item in items[:20]:
        why = f" ({item.reason})" if item.reason else ""
        lines.append(f"  {item.item_id}: {item.status} for {_human(item.waited(now).total_seconds())}{why}")
    if len(items) > 20:
        lines.append(f"  ... and {len(items) - 20} more")
    lines += ["", f"Decide them: conveyor queue --workflow {workflow}  (or the run's Review tab in Airflow)"]
    return "\n".join(lines)


def _human(seconds: float) -> str:
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes:02d} min" if minutes else f"{hours} h"
    if minutes:
        return f"{minutes} min {secs:02d} s" if secs else f"{minutes} min"
    return f"{secs} s"
