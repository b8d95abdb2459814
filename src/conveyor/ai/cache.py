"""The result cache: one model answer per (model, prompt version, input hash), in the ledger DB.

The AI step looks every remote call up here first and writes each chunk's new answers here
before it moves the chunk's items, so a killed, retried or cleared task never sends (nor pays
for) the same input twice. A changed prompt (its version string or its text) or a changed input
is a new key and is sent. The statements are :mod:`conveyor.ledger.ai_cache`'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from conveyor.ledger import ai_cache
from conveyor.ledger.ai_cache import CachedAnswer as CachedAnswer
from conveyor.ledger.store import Ledger


class ResultCache:
    """Answers of one ledger database.

    :param ledger: the ledger whose database holds the cache (migration 0004).
    """

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def get_many(
        self, model: str, prompt_version: str, input_hashes: Sequence[str]
    ) -> dict[str, CachedAnswer]:
        """The cached answers among ``input_hashes`` (input hash -> answer)."""
        if not input_hashes:
            return {}
        with self.ledger.connect() as conn:
            return ai_cache.get_many(conn, model, prompt_version, input_hashes)

    def put_many(
        self,
        model: str,
        prompt_version: str,
        answers: Mapping[str, CachedAnswer],
        item_ids: Mapping[str, str] | None = None,
    ) -> int:
        """Store answers (input hash -> answer), keeping the first answer for a key; returns rows written."""
        if not answers:
            return 0
        with self.ledger.connect() as conn:
            return ai_cache.put_many(conn, model, prompt_version, answers, item_ids)
