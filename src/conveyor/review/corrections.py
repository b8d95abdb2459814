"""A reviewer's correction: given fields replace, the others stay, and every change is audited.

A correction is a JSON object of fields (``{"severity": "high"}``), merged into the item's data
field by field: top-level keys given replace the item's value (``null`` stores null), keys not
given keep theirs. What changed is recorded on the decision's audit row
(``conveyor.transitions.detail``)::

    {"action": "correct", "field": "payload" | "ai_result",
     "changes": [{"field": "severity", "before": "hgih", "after": "high"}, ...], ...}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from conveyor.ledger.values import problem_in
from conveyor.review.errors import InvalidDecision

_MISSING: Any = object()


def merge_changes(
    current: Any, changes: Mapping[str, Any], *, what: str
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The corrected data and its field-level diff.

    :param current: the item's data now (a JSON object; None counts as empty).
    :param changes: the fields the reviewer corrected.
    :param what: what is corrected, for messages (``the payload``, ``the AI result``).
    :raises InvalidDecision: the changes are not a non-empty object, the data is not an object, or
        nothing would change.
    """
    if not isinstance(changes, Mapping) or not changes:
        raise InvalidDecision(f"a correction needs the corrected fields of {what} as a non-empty JSON object")
    if current is None:
        current = {}
    if not isinstance(current, Mapping):
        raise InvalidDecision(
            f"{what} is not a JSON object ({type(current).__name__}): it cannot be corrected field by field"
        )
    bad = [key for key in changes if not isinstance(key, str) or not key.strip()]
    if bad:
        raise InvalidDecision(f"field names must be non-empty strings, got {bad[0]!r}")
    for key, after in changes.items():
        problem = problem_in(after, key)
        if problem:  # jsonb cannot hold it: refused with the field named, never a database error
            raise InvalidDecision(f"the correction cannot be stored: {problem}. Nothing was changed")
    merged = dict(current)
    diff: list[dict[str, Any]] = []
    for key, after in changes.items():
        before = current.get(key, _MISSING)
        if before is not _MISSING and before == after:
            continue
        merged[key] = after
        diff.append({"field": key, "before": None if before is _MISSING else before, "after": after,
                     **({"added": True} if before is _MISSING else {})})  # fmt: skip
    if not diff:
        fields = ", ".join(sorted(changes))
        raise InvalidDecision(f"the correction changes nothing: {fields} already hold these values")
    return merged, diff


def describe_changes(diff: list[Mapping[str, Any]], limit: int = 5) -> str:
    """``severity: 'hgih' -> 'high'; amount: 12 -> 12.5`` (for reasons and logs)."""
    parts = [f"{c['field']}: {c['before']!r} -> {c['after']!r}" for c in diff[:limit]]
    if len(diff) > limit:
        parts.append(f"and {len(diff) - limit} more")
    return "; ".join(parts)
