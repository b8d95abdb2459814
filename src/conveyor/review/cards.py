"""What a reviewer sees of an item without opening it: its workflow's review card, the checks it
failed in plain words, and the value its queue priority is ordered by.

The card comes from the workflow's stored declaration (``Workflow.review_card``), resolved here on
the server so the page, the CLI and any other client show the same fields. A field's path is
``payload.<name>``, ``ai_result.<name>`` (dots go deeper), an item column (``confidence``,
``reason``...), or a bare name looked up in the payload, then in the AI result.

The priority field (``Workflow.priority_field``) is ordered by at query time:
:func:`priority_sql` turns each workflow's field into one SQL expression over the item's row, so
the queue sorts the (small) set of items waiting for a person, read through the partial review
index, without a column to keep in step.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from conveyor.fields import dig
from conveyor.ledger.records import Item
from conveyor.workflow import ITEM_FIELDS, ReviewField, Workflow

#: Item columns a priority field may name (numbers only).
_NUMERIC_COLUMNS = ("confidence", "priority", "attempts")
_SAFE_PART = re.compile(r"^[A-Za-z0-9_\-]+$")


@dataclass(frozen=True)
class CardField:
    """One resolved field of an item's review card.

    :param label: the heading declared (or derived from the path).
    :param kind: how to show it (``text``, ``long``, ``label``, ``amount``, ``number``, ``percent``, ``date``).
    :param value: the item's value (JSON: text, number, list...), None when the item has none.
    :param path: the declared path.
    """

    label: str
    kind: str
    value: Any
    path: str

    def as_json(self) -> dict[str, Any]:
        return {"label": self.label, "kind": self.kind, "value": self.value, "path": self.path}


def field_value(item: Item, path: str) -> Any:
    """The value of ``path`` on ``item`` (see the module doc for the path forms); None when missing."""
    head, _, rest = path.partition(".")
    if head == "payload":
        return dig(item.payload, rest) if rest else item.payload
    if head == "ai_result":
        return dig(item.ai_result, rest) if rest else item.ai_result
    if not rest and (head in ITEM_FIELDS or head in _NUMERIC_COLUMNS):
        return getattr(item, head, None)
    found = dig(item.payload, path)
    return found if found is not None else dig(item.ai_result, path)


def card_of(item: Item, fields: Sequence[ReviewField]) -> list[CardField]:
    """The item's review card: each declared field with the item's value."""
    return [CardField(f.heading, f.kind, field_value(item, f.path), f.path) for f in fields]


def checks_of(item: Item) -> list[str]:
    """The checks an item failed or the doubts about it, one plain sentence each.

    The gate writes ``failed 2 checks: <sentence>; <sentence>`` and the AI step ``<doubt>; <doubt>``;
    each sentence becomes one entry.
    """
    reason = (item.reason or "").strip()
    if not reason:
        return []
    match = re.match(r"^failed \d+ checks?: (.*)$", reason, re.DOTALL)
    body = match.group(1) if match else reason
    return [_plain(part.strip()) for part in body.split("; ") if part.strip()]


def _plain(check: str) -> str:
    """A check without the validation library's rule name in front (``expect_...: <sentence>``)."""
    match = re.match(r"^expect_[a-z0-9_]+:\s*(.+)$", check, re.DOTALL)
    return match.group(1) if match else check


def _json_path(path: str) -> list[str] | None:
    parts = path.split(".")
    return parts if all(_SAFE_PART.match(p) for p in parts) else None


def _number(expr: str) -> str:
    """A jsonb expression as a number, NULL when it holds anything else (never an error)."""
    return f"(CASE WHEN jsonb_typeof({expr}) = 'number' THEN ({expr})::numeric END)"


def field_sql(path: str, params: dict[str, Any], key: str) -> str | None:
    """An SQL expression of the numeric value of ``path`` on a ``conveyor.items`` row, or None when the
    path cannot hold a number. The path travels as a bound parameter (``%(key)s``), never as SQL text.
    """
    head, _, rest = path.partition(".")
    if not rest and head in _NUMERIC_COLUMNS:
        return f"{head}::numeric"
    if head in ("payload", "ai_result") and rest:
        parts = _json_path(rest)
        if parts is None:
            return None
        params[key] = parts
        return _number(f"{head} #> %({key})s::text[]")
    parts = _json_path(path)
    if parts is None:
        return None
    params[key] = parts
    return f"COALESCE({_number(f'payload #> %({key})s::text[]')}, {_number(f'ai_result #> %({key})s::text[]')})"


def priority_sql(flows: Mapping[str, Workflow], params: dict[str, Any]) -> str:
    """One SQL expression: the priority-field value of an item row of any workflow in ``flows``
    (NULL for workflows without a priority field, or items without a number there)."""
    branches = []
    for index, (name, flow) in enumerate(sorted(flows.items())):
        if not flow.priority_field:
            continue
        expr = field_sql(flow.priority_field, params, f"prio_path_{index}")
        if expr is None:
            continue
        params[f"prio_wf_{index}"] = name
        branches.append(f"WHEN %(prio_wf_{index})s THEN {expr}")
    if not branches:
        return "NULL::numeric"
    return f"(CASE workflow {' '.join(branches)} END)"
