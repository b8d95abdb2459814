"""A reviewer's correction of an AI answer, checked as a model's answer is.

The AI step that wrote the answer stored what it promises of its answers in the ledger when it
ran (``conveyor.ai_tasks``: output JSON schema, rule checks, label field; see
:meth:`conveyor.ai.definitions.AITask.declaration`), so the API server checks a correction
without importing the DAG:

* the corrected fields must be fields of the task's output;
* the task's fields of the corrected answer must validate against its output JSON schema;
* the task's rule checks (those of :mod:`conveyor.ai.checks`) must pass, with the item's payload
  as the model input they compare against (``Mentions`` looks for the PO number of the row).
  Custom checks (callables of the workflow's own code) cannot be rebuilt here: they are named in
  the decision's audit detail as not checked.

The step is found by where the item resumes (its review target is the status the AI step
writes), else by the latest AI step in the item's history (an approval routing after an AI step).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from conveyor.ledger.store import Item, Ledger, TransitionRecord
from conveyor.review.errors import InvalidDecision


def find_declaration(ledger: Ledger, item: Item, history: Sequence[TransitionRecord]) -> dict[str, Any] | None:
    """The stored declaration of the AI step whose answer the item holds (None: none stored)."""
    declared = ledger.ai_tasks(item.workflow)
    if item.review_target and item.review_target in declared:
        return declared[item.review_target]
    for record in reversed(history):
        if record.to_status in declared:
            return declared[record.to_status]
    return None


def check_answer(
    ledger: Ledger, item: Item, history: Sequence[TransitionRecord], answer: Mapping[str, Any], changed: Sequence[str]
) -> dict[str, Any]:
    """Check a corrected answer; returns what was checked (``ai_task``, ``unchecked`` custom checks).

    :param ledger: the ledger holding the AI steps' declarations.
    :param item: the item (its payload is the model input the rule checks compare against).
    :param history: the item's transitions.
    :param answer: the corrected AI result (the model's, merged with the reviewer's fields).
    :param changed: the fields the reviewer changed.
    :raises InvalidDecision: no AI step declared the answer's form, or the answer breaks it; the
        message lists every problem.
    """
    declaration = find_declaration(ledger, item, history)
    if declaration is None:
        raise InvalidDecision(
            f"item {item.item_id!r}: no AI step of workflow {item.workflow!r} has stored its output schema, so a "
            "corrected answer cannot be checked; approve or reject it (AI steps store theirs when they run)"
        )
    name = declaration.get("name")
    schema = declaration.get("output_schema") or {}
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    problems: list[str] = []
    own = dict(answer)
    if isinstance(properties, Mapping) and properties:
        unknown = [f for f in changed if f not in properties]
        if unknown:
            problems.append(
                f"{', '.join(repr(f) for f in unknown)} {'is' if len(unknown) == 1 else 'are'} not "
                f"part of the answer of AI task {name!r} (its fields: {', '.join(properties)})"
            )
        own = {k: v for k, v in answer.items() if k in properties}
    problems.extend(_schema_problems(schema, own))
    checks, unchecked = _rebuild_checks(declaration.get("checks") or [])
    if not problems:
        from conveyor.ai.checks import run_checks

        problems.extend(reason for _, reason in run_checks(checks, own, item.payload or {}))
    if problems:
        raise InvalidDecision(f"the corrected answer does not pass AI task {name!r}: " + "; ".join(problems))
    return {"ai_task": name, **({"unchecked": unchecked} if unchecked else {})}


def answer_problems(declaration: Mapping[str, Any], answer: Any) -> list[tuple[str | None, str]]:
    """(field, problem) for each way ``answer`` breaks the AI step's output schema (empty: it passes).

    :param declaration: the AI step's stored declaration (its ``output_schema``).
    :param answer: the item's AI result (None: the step gave no answer).
    """
    schema = declaration.get("output_schema") or {}
    if not isinstance(schema, Mapping) or not schema:
        return []
    if not isinstance(answer, Mapping):
        # Name the fields a later step reads (a report needs ai_result.draft), not just "no answer".
        required = schema.get("required")
        fields = [str(f) for f in required] if isinstance(required, list) else []
        return [(f, f"ai_result.{f} is empty") for f in fields] or [(None, "there is no answer")]
    properties = schema.get("properties")
    own = {k: v for k, v in answer.items() if k in properties} if isinstance(properties, Mapping) else dict(answer)
    import jsonschema

    found: list[tuple[str | None, str]] = []
    for error in jsonschema.Draft202012Validator(schema).iter_errors(own):
        where = ".".join(str(p) for p in error.absolute_path)
        if not where and error.validator == "required":
            missing = [f for f in error.validator_value if f not in own]
            where = missing[0] if missing else ""
        found.append((where or None, f"{where}: {error.message}" if where else error.message))
    return sorted(found, key=lambda p: p[0] or "")


def _schema_problems(schema: Mapping[str, Any], answer: Mapping[str, Any]) -> list[str]:
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema)
    problems = []
    for error in sorted(validator.iter_errors(answer), key=lambda e: list(e.absolute_path)):
        where = ".".join(str(p) for p in error.absolute_path)
        problems.append(f"{where}: {error.message}" if where else error.message)
    return problems


def _rebuild_checks(specs: Sequence[Mapping[str, Any]]) -> tuple[list[Any], list[str]]:
    """The stored rule checks as objects of :mod:`conveyor.ai.checks`; custom ones by name."""
    from conveyor.ai import checks as library

    rebuilt: list[Any] = []
    unchecked: list[str] = []
    for spec in specs:
        kind = getattr(library, str(spec.get("check")), None) if not spec.get("custom") else None
        if kind is None:
            unchecked.append(str(spec.get("check")))
            continue
        args = {k: tuple(v) if isinstance(v, list) else v for k, v in (spec.get("args") or {}).items()}
        rebuilt.append(kind(**args))
    return rebuilt, unchecked
