"""The fields a reviewer corrects on the review page, typed, with the failing ones marked.

The page edits fields, not JSON: for an item on the queue this module says which fields a
correction may touch and how each is typed, from what the ledger recorded (no DAG import):

* quarantined input: the fields of the data its gate validated (``payload``, or ``ai_result`` for
  a gate over extracted fields), typed by the gate's contract stored with the quarantine (a
  number, a whole number, a date in its form, text); the fields of failed checks and blockers are
  ``failing`` (the page focuses the first);
* an AI answer waiting for a person: the fields of the AI step's stored output schema (a choice
  for an enum, a number, text; long text for free sentences), failing where a blocker or the
  doubt names them.

An item whose effect was refused has no form: a correction of it is not a way on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from conveyor.ledger.statuses import Status
from conveyor.ledger.store import Item, Ledger, TransitionRecord
from conveyor.review.blockers import Blocker

#: Text longer than this is edited in a text area, not a one-line input.
LONG_TEXT = 80

_GATE_KINDS = {"number": "number", "integer": "integer", "date": "date", "datetime": "date"}


@dataclass(frozen=True)
class FormField:
    """One field of the correction form.

    :param name: the field's name in the item's data.
    :param kind: ``number``, ``integer``, ``date``, ``choice``, ``long``, ``text`` or ``json`` (a
        list, an object or a boolean, edited as JSON).
    :param value: its current value.
    :param choices: the values a ``choice`` takes.
    :param failing: a check or a blocker names this field (the page focuses the first one).
    :param hint: what the field takes, in words (``a date in the form YYYY-MM-DD``).
    """

    name: str
    kind: str
    value: Any
    choices: tuple[str, ...] = ()
    failing: bool = False
    hint: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "value": self.value, "choices": list(self.choices),
                "failing": self.failing, "hint": self.hint}  # fmt: skip


def form_of(
    ledger: Ledger, item: Item, history: Sequence[TransitionRecord], blockers: Sequence[Blocker]
) -> list[FormField]:
    """The correction form of ``item`` (empty: no correction applies to it).

    :param ledger: the ledger (the AI steps' stored declarations).
    :param item: an item on the review queue.
    :param history: its transitions.
    :param blockers: what blocks its approval (their fields are failing).
    """
    if any(b.code == "effect_refused" for b in blockers):
        return []
    named = {b.field for b in blockers if b.field}
    if item.status == Status.QUARANTINED:
        return _input_form(item, history, named)
    if item.status == Status.PENDING_REVIEW:
        from conveyor.review.ai_answers import find_declaration

        declaration = find_declaration(ledger, item, history)
        return _answer_form(item, declaration, named) if declaration else []
    return []


def _input_form(item: Item, history: Sequence[TransitionRecord], named: set[str]) -> list[FormField]:
    from conveyor.formats import human_format
    from conveyor.review.decisions import quarantine_detail

    detail = quarantine_detail(history)
    found = item.ai_result if detail.field == "ai_result" else item.payload
    data: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    columns = detail.contract.columns if detail.contract is not None else {}
    failing = set(named) | detail.failing_columns
    fields = []
    for name in dict.fromkeys([*data, *columns]):
        column = columns.get(name)
        value = data.get(name)
        kind = (_GATE_KINDS.get(column.type) if column else None) or _kind_of(value)
        dated = column.format if kind == "date" and column is not None else None
        hint = f"a date in the form {human_format(dated)}" if dated else None
        fields.append(FormField(name, kind, value, failing=name in failing, hint=hint))
    # The failing fields first (the stored contract, in jsonb, no longer knows the file's order).
    return sorted(fields, key=lambda f: not f.failing)


def _answer_form(item: Item, declaration: Mapping[str, Any], named: set[str]) -> list[FormField]:
    schema = declaration.get("output_schema") or {}
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    if not isinstance(properties, Mapping):
        return []
    answer = item.ai_result if isinstance(item.ai_result, Mapping) else {}
    reason = item.reason or ""
    if not answer:  # no answer at all: every field the schema requires is to be written
        named = named | {str(f) for f in schema.get("required") or ()}
    fields = []
    for name, spec in properties.items():
        spec = _resolved(spec, schema)
        value = answer.get(name)
        if isinstance(spec.get("enum"), list):
            kind, choices = "choice", tuple(str(c) for c in spec["enum"])
        else:
            kind, choices = _answer_kind(spec, value), ()
        failing = name in named or (not named and _named_in(name, reason))
        fields.append(FormField(str(name), kind, value, choices=choices, failing=failing,
                                hint=spec.get("description")))  # fmt: skip
    return fields


def _resolved(spec: Any, schema: Mapping[str, Any]) -> dict[str, Any]:
    """A property's schema with a local ``$ref`` (pydantic puts enums in ``$defs``) followed."""
    if not isinstance(spec, Mapping):
        return {}
    ref = spec.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        target = (schema.get("$defs") or {}).get(ref.rsplit("/", 1)[-1])
        if isinstance(target, Mapping):
            return {**target, **{k: v for k, v in spec.items() if k != "$ref"}}
    return dict(spec)


def _answer_kind(spec: Mapping[str, Any], value: Any) -> str:
    kind = spec.get("type")
    if kind in ("number", "integer"):
        return str(kind)
    # A sentence the model writes (a draft, a summary) is long text even when it happens to be short.
    long_words = ("sentence", "summary", "draft", "paragraph")
    if _is_long(value) or any(w in str(spec.get("description") or "").lower() for w in long_words):
        return "long"
    return "text"


def _kind_of(value: Any) -> str:
    """A field the contract does not type, by its value: a number stays a number, a list or an
    object is edited as JSON, text as text."""
    if isinstance(value, bool):
        return "json"  # true/false, edited as JSON so it stays a boolean
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, (Mapping, list)):
        return "json"
    return "long" if _is_long(value) else "text"


def _is_long(value: Any) -> bool:
    return isinstance(value, str) and (len(value) > LONG_TEXT or "\n" in value)


def _named_in(name: str, reason: str) -> bool:
    import re

    return re.search(rf"\b{re.escape(name)}\b", reason) is not None
