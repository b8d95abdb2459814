"""What stands between an item and an approval as it is: the step contract a person cannot waive.

An approval resumes an item's chain without changing it, so it is refused while the item would
break the step that reads it next. Three kinds of item are blocked (each :class:`Blocker` names the
field, what it needs, and the decisions that do apply):

* ``needs_correction``: quarantined input that failed a hard check of its gate (a required field
  empty, a value not of its type or form; :mod:`conveyor.gate.contract`), or whose data breaks the
  recorded contract now, or an item a publication could not render. Business-rule findings (a
  duplicate id, an amount over a bound) are waivable and block nothing;
* ``no_answer``: an item whose AI step gave no answer that passes the step's output schema (the
  model failed, or answered out of form). The reviewer writes the answer (``correct``) or sends it
  back to the AI step (``retry_ai``);
* ``effect_refused``: an item whose effect (a payment) was refused: approving it would record the
  effect's status without the effect. A person retries it (``retry_effect``), records it as done
  elsewhere with a reference (``done_elsewhere``), or rejects it.

Blockers of many items are found with two ledger reads (each item's move onto the queue, the
workflow's AI step declarations), so the bulk path checks every item as the single one does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from conveyor.ledger.statuses import REVIEW_VALUES, Status
from conveyor.ledger.store import Item, Ledger, TransitionRecord
from conveyor.quarantine import InputContract, QuarantineDetail
from conveyor.review.coercion import coerce_value


@dataclass(frozen=True)
class Blocker:
    """Why an item cannot be approved as it is.

    :param code: ``needs_correction``, ``no_answer`` or ``effect_refused``.
    :param field: the field concerned (None: the item as a whole).
    :param need: one sentence: what is wrong and what it needs.
    :param actions: the decisions that apply instead of an approval.
    """

    code: str
    field: str | None
    need: str
    actions: tuple[str, ...]

    def as_json(self) -> dict[str, Any]:
        return {"code": self.code, "field": self.field, "need": self.need, "actions": list(self.actions)}


def describe(blockers: Sequence[Blocker]) -> str:
    """One message naming every field and what it needs."""
    return "; ".join(b.need for b in blockers)


def contract_problems(data: Mapping[str, Any] | None, contract: InputContract | None) -> list[Blocker]:
    """The item's data checked against the gate's hard contract: required fields present, typed
    fields of their type (what an approval would let past the gate)."""
    if contract is None:
        return []
    data = data or {}
    found: list[Blocker] = []
    for name in contract.required:
        value = data.get(name)
        if value is None or (isinstance(value, str) and not value.strip()):
            found.append(_correction(name, f"{name} is empty: it is required, correct it"))
    for name, column in contract.columns.items():
        value = data.get(name)
        if value is None or name in {b.field for b in found}:
            continue
        try:
            typed = coerce_value(name, value, column, data)
        except ValueError as exc:
            found.append(_correction(name, f"{exc}: correct it"))
            continue
        if column.type in ("number", "integer") and not isinstance(value, (int, float)):
            # "1936.40" as text passes the gate's parse but breaks a step comparing numbers.
            found.append(_correction(name, f"{name} holds text {value!r}, not the number {typed!r}: correct it"))
    return found


def _correction(name: str | None, need: str) -> Blocker:
    return Blocker("needs_correction", name, need, ("correct", "reject"))


def blockers_of(ledger: Ledger, items: Sequence[Item]) -> dict[str, list[Blocker]]:
    """Item id -> what blocks its approval as it is (items with nothing in the way are absent).

    :param ledger: the ledger (each item's move onto the queue, the AI steps' declarations).
    :param items: items on the review queue.
    """
    waiting = [i for i in items if i.status in REVIEW_VALUES]
    if not waiting:
        return {}
    entries = ledger.latest_moves([i.item_id for i in waiting], to_status=REVIEW_VALUES)
    declared: dict[str, dict[str, dict[str, Any]]] = {}
    found: dict[str, list[Blocker]] = {}
    for item in waiting:
        entry = entries.get(item.item_id)
        detail = entry.detail if entry is not None and isinstance(entry.detail, Mapping) else {}
        if item.status == Status.QUARANTINED:
            blockers = _quarantine_blockers(item, QuarantineDetail.from_json(detail))
        else:
            if item.workflow not in declared:
                declared[item.workflow] = ledger.ai_tasks(item.workflow)
            blockers = _pending_blockers(item, entry, detail, declared[item.workflow])
        if blockers:
            found[item.item_id] = blockers
    return found


def _quarantine_blockers(item: Item, detail: QuarantineDetail) -> list[Blocker]:
    blockers: list[Blocker] = []
    for check in detail.checks:
        if not check.waivable:
            blockers.append(_correction(check.column, f"{check.message or check.column}: a person cannot waive "
                                                      "this check, correct the item or reject it"))
    data = item.ai_result if detail.field == "ai_result" else item.payload
    named = {b.field for b in blockers}
    blockers.extend(b for b in contract_problems(data if isinstance(data, Mapping) else {}, detail.contract)
                    if b.field not in named)  # fmt: skip
    return blockers


def _pending_blockers(
    item: Item, entry: TransitionRecord | None, detail: Mapping[str, Any], declared: Mapping[str, dict[str, Any]]
) -> list[Blocker]:
    if detail.get("effect"):
        why = (entry.reason if entry is not None else None) or item.reason or "refused"
        return [Blocker(
            "effect_refused", None,
            f"the effect {detail['effect']!r} was refused ({why}): approving would record {item.review_target!r} "
            "without it; retry the effect, record it as done elsewhere with a reference, or reject the item",
            ("retry_effect", "done_elsewhere", "reject"),
        )]  # fmt: skip
    if detail.get("unrenderable"):
        return [_correction(None, f"{detail['unrenderable']} could not render it ({detail.get('error')}): "
                                  "approving it as it is would break the publication again; correct or reject it")]
    declaration = declared.get(item.review_target or "")
    if declaration is None:
        return []
    from conveyor.review.ai_answers import answer_problems

    problems = answer_problems(declaration, item.ai_result)
    if not problems:
        return []
    name = declaration.get("name")
    field = problems[0][0]
    return [Blocker(
        "no_answer", field,
        f"the AI step {name!r} gave no usable answer ({'; '.join(p for _, p in problems)}): write the answer "
        "(correct) or send the item back to the AI step (retry_ai)",
        ("correct", "retry_ai", "reject"),
    )]  # fmt: skip
