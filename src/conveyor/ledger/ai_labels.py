"""What AI steps did with their answers, and what people said of them (migration 0017).

Two tables, written and read only here (through :class:`conveyor.ledger.Ledger`):

* ``conveyor.ai_step_tallies``: one row per committed chunk of an AI step, with how many answers
  passed, were spot-checked or were routed to review, and confidence histograms
  (:class:`StepTally`);
* ``conveyor.ai_labels``: one row per decided AI answer, whether it stood (:class:`AnswerLabel`).

A label is built from the transition that routed the item to review: the AI step writes on it
(``detail``) which step it was, the answer's confidence, the checks that failed and whether it was
a spot check with its sampling share (see :func:`routing_detail`). The decision names the outcome.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import psycopg

#: Confidence buckets of the histograms: floor(confidence * 100), 0..100.
BUCKETS = 101
#: What a decision says of the model's answer.
OUTCOMES = ("right", "wrong", "bad_input")


def bucket(confidence: float | None) -> int:
    """The histogram bucket of a confidence (no confidence counts as 0)."""
    if confidence is None:
        return 0
    return min(max(int(confidence * 100), 0), BUCKETS - 1)


def routing_detail(
    *,
    step: str,
    confidence: float | None,
    failed_checks: Sequence[str],
    spot_check: bool,
    share: float,
    seed: str | None = None,
) -> dict[str, Any]:
    """What an AI step writes on the audit row of an answer it sends to review, for its label later.

    :param step: the AI step (its task id).
    :param confidence: the answer's confidence.
    :param failed_checks: the codes of the checks it failed (``low_confidence``, ``check:...``).
    :param spot_check: it passed every check and was drawn at random.
    :param share: its sampling share: the spot check share, or 1 (every doubtful answer is reviewed).
    :param seed: what the spot checks were drawn with (spot checks only).
    """
    detail: dict[str, Any] = {
        "ai_step": step,
        "confidence": confidence,
        "failed_checks": list(failed_checks),
        "spot_check": spot_check,
        "share": share,
    }
    if seed is not None:
        detail["seed"] = seed
    return detail


@dataclass(frozen=True)
class StepTally:
    """What one committed chunk of an AI step did.

    :param passed: answers moved on unreviewed.
    :param spot_checked: answers that passed every check and were sent to review at random.
    :param exceptions: items routed to review by a check or a failure.
    :param passed_by_confidence: answers that passed every check (spot checks included) per
        confidence bucket (:data:`BUCKETS`).
    :param low_only_by_confidence: answers routed for low confidence alone, per bucket.
    """

    workflow: str
    step: str
    run_id: str
    min_confidence: float
    spot_check: float
    max_error_rate: float | None
    seed: str
    passed: int = 0
    spot_checked: int = 0
    exceptions: int = 0
    passed_by_confidence: list[int] = field(default_factory=lambda: [0] * BUCKETS)
    low_only_by_confidence: list[int] = field(default_factory=lambda: [0] * BUCKETS)
    at: datetime | None = None


@dataclass(frozen=True)
class Decision:
    """A person's decision on one AI answer, as a label.

    :param outcome: ``right`` (approved), ``wrong`` (corrected), ``bad_input`` (rejected).
    :param fields: the fields a correction changed.
    """

    item_id: str
    outcome: str
    fields: tuple[str, ...] = ()


@dataclass(frozen=True)
class AnswerLabel:
    """One decided AI answer (a row of ``conveyor.ai_labels``)."""

    item_id: str
    workflow: str
    step: str
    run_id: str
    routed_at: datetime
    outcome: str
    fields: list[str]
    confidence: float | None
    failed_checks: list[str]
    spot_check: bool
    share: float
    decided_by: str
    decided_at: datetime


def record_tallies(conn: psycopg.Connection, tallies: Sequence[StepTally]) -> None:
    """Insert chunk tallies (one statement)."""
    if not tallies:
        return
    columns = (
        "workflow", "step", "run_id", "min_confidence", "spot_check", "max_error_rate", "seed",
        "passed", "spot_checked", "exceptions",
    )  # fmt: skip
    with conn.cursor() as cur:
        cur.executemany(
            f"INSERT INTO conveyor.ai_step_tallies ({', '.join(columns)}, passed_by_confidence,"
            f" low_only_by_confidence) VALUES ({', '.join(['%s'] * (len(columns) + 2))})",
            [
                (*(getattr(t, c) for c in columns), list(t.passed_by_confidence), list(t.low_only_by_confidence))
                for t in tallies
            ],
        )


def read_tallies(
    conn: psycopg.Connection, workflow: str, *, since: datetime, until: datetime, step: str | None = None
) -> list[StepTally]:
    """The tallies of ``workflow`` (one step's, when given) committed in ``[since, until)``, oldest first."""
    query = (
        "SELECT workflow, step, run_id, min_confidence, spot_check, max_error_rate, seed, passed, spot_checked,"
        " exceptions, passed_by_confidence, low_only_by_confidence, at FROM conveyor.ai_step_tallies"
        " WHERE workflow = %s AND at >= %s AND at < %s"
    )
    params: list[Any] = [workflow, since, until]
    if step is not None:
        query += " AND step = %s"
        params.append(step)
    rows = conn.execute(query + " ORDER BY at, id", params).fetchall()
    return [StepTally(*row) for row in rows]


# The label of each decided item, from the latest transition that an AI step routed it to review
# with (its detail names the step), joined to the decision given: one statement for a bulk decision.
_RECORD_LABELS = """
INSERT INTO conveyor.ai_labels (routed_id, item_id, workflow, step, run_id, routed_at, outcome, fields,
                                confidence, failed_checks, spot_check, share, decided_by)
SELECT r.id, r.item_id, r.workflow, r.detail ->> 'ai_step', r.run_id, r.at, d.outcome,
       ARRAY(SELECT jsonb_array_elements_text(d.fields::jsonb)),
       (r.detail ->> 'confidence')::float8,
       ARRAY(SELECT jsonb_array_elements_text(COALESCE(r.detail -> 'failed_checks', '[]'::jsonb))),
       COALESCE((r.detail ->> 'spot_check')::boolean, false),
       COALESCE((r.detail ->> 'share')::float8, 1.0),
       %(actor)s
FROM unnest(%(ids)s::text[], %(outcomes)s::text[], %(fields)s::text[]) AS d(item_id, outcome, fields)
CROSS JOIN LATERAL (
    SELECT t.id, t.item_id, t.workflow, t.run_id, t.at, t.detail FROM conveyor.transitions t
    WHERE t.item_id = d.item_id AND t.to_status = 'pending_review' AND t.detail ? 'ai_step'
    ORDER BY t.id DESC LIMIT 1
) r
ON CONFLICT (routed_id) DO UPDATE SET
    outcome = EXCLUDED.outcome, fields = EXCLUDED.fields, decided_by = EXCLUDED.decided_by,
    decided_at = now()
"""


def record_labels(conn: psycopg.Connection, decisions: Sequence[Decision], actor: str) -> int:
    """Label the decided items an AI step had routed to review (others are skipped); returns how many."""
    import json

    if not decisions:
        return 0
    bad = sorted({d.outcome for d in decisions} - set(OUTCOMES))
    if bad:
        raise ValueError(f"unknown label outcome {bad[0]!r}; use one of {', '.join(OUTCOMES)}")
    cur = conn.execute(
        _RECORD_LABELS,
        {
            "ids": [d.item_id for d in decisions],
            "outcomes": [d.outcome for d in decisions],
            "fields": [json.dumps(list(d.fields)) for d in decisions],
            "actor": actor,
        },
    )
    return cur.rowcount


def forget_labels(conn: psycopg.Connection, item_ids: Sequence[str]) -> int:
    """Drop the labels of decisions taken back (an undo): the answer is undecided again."""
    if not item_ids:
        return 0
    cur = conn.execute(
        "DELETE FROM conveyor.ai_labels l USING (SELECT DISTINCT ON (item_id) item_id, id FROM conveyor.transitions"
        " WHERE item_id = ANY(%s) AND to_status = 'pending_review' AND detail ? 'ai_step'"
        " ORDER BY item_id, id DESC) r WHERE l.routed_id = r.id",
        (list(item_ids),),
    )
    return cur.rowcount


def read_labels(
    conn: psycopg.Connection, workflow: str, *, since: datetime, until: datetime, step: str | None = None
) -> list[AnswerLabel]:
    """The labels of answers of ``workflow`` routed to review in ``[since, until)``, oldest first."""
    query = (
        "SELECT item_id, workflow, step, run_id, routed_at, outcome, fields, confidence, failed_checks, spot_check,"
        " share, decided_by, decided_at FROM conveyor.ai_labels WHERE workflow = %s AND routed_at >= %s"
        " AND routed_at < %s"
    )
    params: list[Any] = [workflow, since, until]
    if step is not None:
        query += " AND step = %s"
        params.append(step)
    rows = conn.execute(query + " ORDER BY routed_at, routed_id", params).fetchall()
    return [AnswerLabel(*row) for row in rows]


def steps_of(conn: psycopg.Connection, workflow: str) -> list[str]:
    """The AI steps of ``workflow`` that ever committed a tally."""
    rows = conn.execute(
        "SELECT DISTINCT step FROM conveyor.ai_step_tallies WHERE workflow = %s ORDER BY step", (workflow,)
    ).fetchall()
    return [r[0] for r in rows]


def label_counts(labels: Sequence[AnswerLabel]) -> Mapping[str, int]:
    """outcome -> how many (for summaries)."""
    out: dict[str, int] = {o: 0 for o in OUTCOMES}
    for label in labels:
        out[label.outcome] = out.get(label.outcome, 0) + 1
    return out
