"""The AI steps' result cache: ``conveyor.ai_results``, one model answer per (model, prompt version, input hash).

When the cache is asked and what goes into it is :class:`conveyor.ai.cache.ResultCache`'s and the
AI step's; this module owns the statements. The functions take an open connection of the store.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg

from conveyor.ledger.hashing import canonical_json


@dataclass(frozen=True)
class CachedAnswer:
    """A parsed answer as stored.

    :param output: the schema-valid output (JSON-ready).
    :param confidence: its confidence, when the model or method gave one.
    :param detail: how the confidence was obtained, calls spent.
    """

    output: dict[str, Any]
    confidence: float | None
    detail: dict[str, Any] = field(default_factory=dict)


def get_many(
    conn: psycopg.Connection, model: str, prompt_version: str, input_hashes: Sequence[str]
) -> dict[str, CachedAnswer]:
    """The cached answers among ``input_hashes`` (input hash -> answer)."""
    rows = conn.execute(
        "SELECT input_hash, output, confidence, detail FROM conveyor.ai_results"
        " WHERE model = %s AND prompt_version = %s AND input_hash = ANY(%s)",
        (model, prompt_version, list(set(input_hashes))),
    ).fetchall()
    return {h: CachedAnswer(output=o, confidence=c, detail=d or {}) for h, o, c, d in rows}


def put_many(
    conn: psycopg.Connection,
    model: str,
    prompt_version: str,
    answers: Mapping[str, CachedAnswer],
    item_ids: Mapping[str, str] | None = None,
) -> int:
    """Store answers (input hash -> answer), keeping the first answer for a key; returns rows written.

    :param item_ids: input hash -> the item whose answer it was (for the audit).
    """
    hashes = list(answers)
    cur = conn.execute(
        """
        INSERT INTO conveyor.ai_results
            (model, prompt_version, input_hash, output, confidence, detail, item_id)
        SELECT %s, %s, h, o::jsonb, c, d::jsonb, i
        FROM unnest(%s::text[], %s::text[], %s::float8[], %s::text[], %s::text[]) AS u(h, o, c, d, i)
        ON CONFLICT (model, prompt_version, input_hash) DO NOTHING
        """,
        (
            model,
            prompt_version,
            hashes,
            [canonical_json(answers[h].output) for h in hashes],
            [answers[h].confidence for h in hashes],
            [canonical_json(answers[h].detail) for h in hashes],
            [(item_ids or {}).get(h) for h in hashes],
        ),
    )
    return cur.rowcount


__all__ = ["CachedAnswer", "get_many", "put_many"]
