"""The one spelling of a payload, and the hashes and ids made from it.

Everything that compares payloads (a re-sent file, the AI cache, a correction's new input hash)
hashes the same canonical JSON text, so a payload hashes the same in the gate, the AI step and
the ledger. No database here: the AI step and the gate import it without the driver.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

#: One encoder for every call: ``json.dumps`` with options builds a new encoder each time (a
#: third of the serialisation time of 100k small payloads).
_ENCODE = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str).encode


def canonical_json(value: Any) -> str:
    """The one JSON spelling of a payload that hashes and compares the same everywhere."""
    return _ENCODE(value)


def hash_text(text: str) -> str:
    """sha256 of an already canonical JSON text (see :func:`input_hash`)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def input_hash(payload: Any) -> str:
    """sha256 of the canonical payload: what the cache and the idempotency checks key on."""
    return hash_text(canonical_json(payload))


def item_id_for(workflow: str, business_key: str) -> str:
    return f"{workflow}:{business_key}"


def effect_key(item_id: str, step: str) -> str:
    """A stable idempotency key for an external system (payment API, mail server)."""
    return hashlib.sha256(f"{item_id}\x00{step}".encode()).hexdigest()[:32]
