"""What a guarded step records beside its items' statuses, as :class:`~conveyor.ledger.store.Ledger`
methods: effects claimed once per (item, step), the leases of a sharded step, the AI step's tallies
and labels (the guardrail measured), and alerts sent once.

A part of the facade of its own so that the facade stays a table of contents: each method opens
one block and hands it to the module holding the statements.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import TYPE_CHECKING, Any

from conveyor.ledger import ai_labels, alerts_sent, effects, leases
from conveyor.ledger.hashing import effect_key as _effect_key

if TYPE_CHECKING:
    import psycopg


class StepRecords:
    """The step-record methods of :class:`~conveyor.ledger.store.Ledger` (a mixin: the facade
    gives the connection)."""

    def connect(self) -> AbstractContextManager[psycopg.Connection]:
        raise NotImplementedError  # the Ledger's

    # -- alerts sent once ----------------------------------------------------------------------

    def claim_alert(self, key: str, subject: str, *, sent_by: str | None = None) -> bool:
        """Claim the right to send the alert ``key``: True once, False for every later claim."""
        with self.connect() as conn:
            return alerts_sent.claim(conn, key, subject, sent_by)

    def release_alert(self, key: str) -> None:
        """Give an alert's claim back (its sending failed): the next reporter of it sends."""
        with self.connect() as conn:
            alerts_sent.release(conn, key)

    # -- the guardrail measured (ledger.ai_labels) ---------------------------------------------

    def record_ai_tallies(self, tallies: Sequence[ai_labels.StepTally]) -> None:
        """Record what committed chunks of an AI step did (passed, spot-checked, routed; confidences)."""
        with self.connect() as conn:
            ai_labels.record_tallies(conn, tallies)

    def ai_tallies(
        self, workflow: str, *, since: datetime, until: datetime, step: str | None = None
    ) -> list[ai_labels.StepTally]:
        """The AI step tallies of ``workflow`` committed in ``[since, until)``, oldest first."""
        with self.connect() as conn:
            return ai_labels.read_tallies(conn, workflow, since=since, until=until, step=step)

    def record_ai_labels(self, decisions: Sequence[ai_labels.Decision], *, actor: str) -> int:
        """Label the decided AI answers (set-based); items no AI step routed are skipped."""
        with self.connect() as conn:
            return ai_labels.record_labels(conn, decisions, actor)

    def forget_ai_labels(self, item_ids: Sequence[str]) -> int:
        """Drop the labels of decisions taken back."""
        with self.connect() as conn:
            return ai_labels.forget_labels(conn, item_ids)

    def answer_labels(
        self, workflow: str, *, since: datetime, until: datetime, step: str | None = None
    ) -> list[ai_labels.AnswerLabel]:
        """The labels of ``workflow``'s answers routed to review in ``[since, until)``."""
        with self.connect() as conn:
            return ai_labels.read_labels(conn, workflow, since=since, until=until, step=step)

    def ai_steps(self, workflow: str) -> list[str]:
        """The AI steps of ``workflow`` that ever recorded a tally."""
        with self.connect() as conn:
            return ai_labels.steps_of(conn, workflow)

    # -- idempotency keys --------------------------------------------------------------------

    def claim_effects(self, step: str, item_ids: Sequence[str], *, actor: str) -> list[str]:
        """Claim the (item, step) key for each item; returns only the items not already done.

        A claim left by a crashed attempt (state ``claimed``) is handed out again: the caller
        must make the effect itself idempotent on the key (see :meth:`effect_key`).
        """
        with self.connect() as conn:
            return effects.claim(conn, step, item_ids, actor)

    def complete_effects(self, step: str, results: Mapping[str, Any]) -> int:
        """Mark the (item, step) keys done with their results; returns how many were open."""
        with self.connect() as conn:
            return effects.complete(conn, step, results)

    def effects(self, step: str, item_ids: Sequence[str] | None = None) -> dict[str, dict[str, Any]]:
        """The recorded effects of a step (item id -> state, result, times)."""
        with self.connect() as conn:
            return effects.read(conn, step, item_ids)

    #: A stable idempotency key for an external system (payment API, mail server).
    effect_key = staticmethod(_effect_key)

    # -- step leases (sharded steps) ---------------------------------------------------------

    def claim_chunk(
        self,
        *,
        workflow: str,
        run_id: str,
        status: str,
        step: str,
        holder: leases.Holder,
        limit: int,
        lease_seconds: float,
    ) -> leases.Claim:
        """Lease up to ``limit`` of the run's items in ``status`` that no live lease keeps, in one
        statement (``FOR UPDATE SKIP LOCKED``); see :mod:`conveyor.ledger.leases`."""
        with self.connect() as conn:
            return leases.claim(
                conn, workflow=workflow, run_id=run_id, status=status, step=step, holder=holder,
                limit=limit, lease_seconds=lease_seconds,
            )

    def renew_leases(self, step: str, holder: leases.Holder, lease_seconds: float) -> int:
        """Extend every lease this attempt holds on ``step``; returns how many."""
        with self.connect() as conn:
            return leases.renew(conn, step, holder, lease_seconds)

    def release_leases(self, step: str, holder: leases.Holder, item_ids: Sequence[str] | None = None) -> int:
        """Drop this attempt's leases on ``step`` (all, or those of ``item_ids``)."""
        with self.connect() as conn:
            return leases.release(conn, step, holder, item_ids)

    def leased_elsewhere(self, *, workflow: str, run_id: str, status: str, step: str, holder: leases.Holder) -> int:
        """How many of the run's items in ``status`` another holder's live lease keeps."""
        with self.connect() as conn:
            return leases.foreign_live(conn, workflow=workflow, run_id=run_id, status=status, step=step, holder=holder)
