"""Rule checks on a model's parsed output, each returning the reason a reviewer will read.

:class:`Check` is the contract (public as ``conveyor.Check``); the checks below are the library's
own. An item with any failed check goes to review with every reason joined, whatever its
confidence.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any, Protocol, runtime_checkable

from conveyor.fields import dig


@runtime_checkable
class Check(Protocol):
    """The contract of a rule check, as ``AITask(checks=(...))`` runs it on each item's answer.

    A check is any callable ``check(output, model_input) -> str | None``, best a small frozen
    dataclass (its fields are its settings, and its ``repr`` is part of the AI task's fingerprint,
    so a changed setting is a new version of the task):

    * ``output``: the model's answer for one item, parsed and validated against the task's
      ``output_schema``, as a dict (with a person's correction merged in when a reviewer corrects it);
    * ``model_input``: what the task's ``render`` made of the item (the item's payload when a
      person's correction is checked);
    * return ``None`` when the answer passes, else one sentence a reviewer can act on, naming the
      field, the value and the rule;
    * an optional ``code`` attribute names the check in the item's record (default: the class name).

    A check that raises is reported as a failed check ("check X could not run: ..."), never as a
    crash of the step. Checks of this module are stored with their settings in the ledger and run
    again on a reviewer's correction; a check of your own is run by the AI step only (a correction
    is checked against the output schema and the library's checks).

    Example, a draft must name the supplier it was written for::

        from dataclasses import dataclass

        from conveyor import AITask, Check, Required

        @dataclass(frozen=True)
        class NamesSupplier:
            field: str = "draft"
            code: str = "names_supplier"

            def __call__(self, output, model_input):
                supplier = str(model_input.get("supplier_name") or "")
                if supplier and supplier.lower() not in str(output.get(self.field) or "").lower():
                    return f"{self.field} does not name the supplier {supplier!r}"
                return None

        assert isinstance(NamesSupplier(), Check)
        CLASSIFY = AITask(..., checks=(Required(("category", "draft")), NamesSupplier()))
    """

    def __call__(self, output: Mapping[str, Any], model_input: Mapping[str, Any]) -> str | None:
        """The reason the answer fails this check, or None when it passes."""
        ...


#: Phrases that say nothing a reviewer or a report reader can act on.
VAGUE_PHRASES: tuple[str, ...] = (
    "see notes",
    "see attached",
    "see email",
    "see above",
    "as discussed",
    "please check",
    "n/a",
    "tbd",
    "to be determined",
    "various",
    "misc",
    "unknown issue",
    "some issue",
    "an issue",
    "a problem",
    "other issue",
    "etc.",
    "lorem ipsum",
)


#: Compiled once: ``re.findall(pattern, ...)`` looks its pattern up in re's cache on every call.
_WORD = re.compile(r"\w+")
_SENTENCE_BREAK = re.compile(r"[.!?]\s+[A-Z]")


def _missing(value: Any) -> bool:
    if value is None:
        return True
    kind = type(value)
    if kind is str:  # the common case first: checks run on every item of every chunk
        return not value.strip()
    if kind in (list, tuple, dict):
        return not value
    return (isinstance(value, str | list | tuple | dict) and len(value) == 0) or (
        isinstance(value, str) and not value.strip()
    )


@dataclass(frozen=True)
class Required:
    """Each field is present and not empty.

    :param fields: dotted field names.
    """

    fields: Sequence[str]
    code: str = "required"

    def __call__(self, output: Mapping[str, Any], model_input: Mapping[str, Any]) -> str | None:
        missing = [f for f in self.fields if _missing(dig(output, f))]
        if not missing:
            return None
        return (
            f"required field{'s' if len(missing) > 1 else ''} {', '.join(repr(m) for m in missing)} missing"
        )


@dataclass(frozen=True)
class NotVague:
    """A text field says something specific: enough words, none of the empty phrases.

    :param field: the text field.
    :param min_words: fewer words than this is vague.
    :param phrases: phrases that make a text vague.
    """

    field: str
    min_words: int = 6
    phrases: Sequence[str] = VAGUE_PHRASES
    code: str = "vague"

    def __call__(self, output: Mapping[str, Any], model_input: Mapping[str, Any]) -> str | None:
        text = dig(output, self.field)
        if _missing(text):
            return f"{self.field} is empty"
        lowered = str(text).lower()
        hits = [p for p in self.phrases if p in lowered]
        if hits:
            return f"{self.field} is vague (says {hits[0]!r}): {_quote(text)}"
        if len(_WORD.findall(lowered)) < self.min_words:
            return f"{self.field} is too short to be useful ({len(lowered.split())} words): {_quote(text)}"
        return None


@dataclass(frozen=True)
class OneSentence:
    """A text field is one sentence of reasonable length.

    :param field: the text field.
    :param max_chars: longer is not one sentence for a report line.
    """

    field: str
    max_chars: int = 320
    code: str = "not_one_sentence"

    def __call__(self, output: Mapping[str, Any], model_input: Mapping[str, Any]) -> str | None:
        text = str(dig(output, self.field) or "").strip()
        if len(text) > self.max_chars:
            return (
                f"{self.field} is {len(text)} characters long; "
                f"one report sentence is at most {self.max_chars}"
            )
        # A sentence end followed by more text (abbreviations like "approx." are rare in drafts).
        if _SENTENCE_BREAK.search(text):
            return f"{self.field} has more than one sentence: {_quote(text)}"
        return None


@dataclass(frozen=True)
class Mentions:
    """A text field mentions the input values it must (the PO number, the supplier).

    :param field: the text field.
    :param input_keys: model-input keys whose values must appear (case-insensitive).
    :param labels: how to name each key in the reason.
    """

    field: str
    input_keys: Sequence[str]
    # dataclasses.field spelled out: the class's own ``field`` attribute shadows the bare name for mypy.
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    code: str = "missing_mention"

    def __call__(self, output: Mapping[str, Any], model_input: Mapping[str, Any]) -> str | None:
        text = str(dig(output, self.field) or "").lower()
        absent = [
            f"{self.labels.get(k, k)} {model_input[k]}"
            for k in self.input_keys
            if not _missing(model_input.get(k)) and str(model_input[k]).lower() not in text
        ]
        if absent:
            return f"{self.field} does not mention the {' or the '.join(absent)}"
        return None


@dataclass(frozen=True)
class InRange:
    """A number lies in a plausible range (``low < value <= high``).

    :param field: the numeric field.
    :param low: exclusive lower bound.
    :param high: inclusive upper bound.
    """

    field: str
    low: float
    high: float
    code: str = "out_of_range"

    def __call__(self, output: Mapping[str, Any], model_input: Mapping[str, Any]) -> str | None:
        value = dig(output, self.field)
        if value is None:
            return None  # Required() reports absence
        try:
            number = float(value)
        except (TypeError, ValueError):
            return f"{self.field} {value!r} is not a number"
        if not self.low < number <= self.high:
            bounds = f"({self.low:,.0f}, {self.high:,.0f}]"
            return f"{self.field} {number:,.2f} is outside the plausible range {bounds}"
        return None


@dataclass(frozen=True)
class OneOf:
    """A field holds one of the allowed values.

    :param field: the field.
    :param allowed: the allowed values.
    """

    field: str
    allowed: Sequence[str]
    code: str = "not_allowed"

    def __call__(self, output: Mapping[str, Any], model_input: Mapping[str, Any]) -> str | None:
        value = dig(output, self.field)
        if value is None or value in self.allowed:
            return None
        return f"{self.field} {value!r} is not one of {', '.join(self.allowed)}"


@dataclass(frozen=True)
class PlausibleDates:
    """Invoice dates are plausible: not in the future, not too old, due on or after issue.

    :param issued: the issue-date field.
    :param due: the due-date field.
    :param max_age_days: an older issue date is implausible.
    :param today: the reference day (today when None).
    """

    issued: str = "invoice_date"
    due: str = "due_date"
    max_age_days: int = 400
    today: date | None = None
    code: str = "implausible_date"

    def __call__(self, output: Mapping[str, Any], model_input: Mapping[str, Any]) -> str | None:
        today = self.today or date.today()
        issued, due = _as_date(dig(output, self.issued)), _as_date(dig(output, self.due))
        if issued is not None and issued > today + timedelta(days=1):
            return f"{self.issued} {issued.isoformat()} is in the future"
        if issued is not None and issued < today - timedelta(days=self.max_age_days):
            return f"{self.issued} {issued.isoformat()} is more than {self.max_age_days} days old"
        if issued is not None and due is not None and due < issued:
            return f"{self.due} {due.isoformat()} is before {self.issued} {issued.isoformat()}"
        return None


@dataclass(frozen=True)
class LineItemsAddUp:
    """Each line's amount is quantity x unit price, and the lines add up to the total.

    :param tolerance: absolute rounding tolerance in the invoice currency.
    """

    tolerance: float = 0.011
    code: str = "does_not_add_up"

    def __call__(self, output: Mapping[str, Any], model_input: Mapping[str, Any]) -> str | None:
        lines = output.get("line_items") or []
        problems: list[str] = []
        for number, line in enumerate(lines, start=1):
            try:
                expected = float(line["quantity"]) * float(line["unit_price"])
                amount = float(line["amount"])
            except (KeyError, TypeError, ValueError):
                problems.append(f"line {number} has no usable quantity, unit price or amount")
                continue
            if abs(expected - amount) > max(self.tolerance, abs(expected) * 1e-6):
                problems.append(
                    f"line {number} ({line.get('description', '?')}): {_num(line['quantity'])} x "
                    f"{float(line['unit_price']):.2f} = {expected:.2f}, not {amount:.2f}"
                )
        total = output.get("total")
        if lines and total is not None and not problems:
            line_sum = sum(float(line["amount"]) for line in lines)
            if abs(line_sum - float(total)) > self.tolerance:
                problems.append(f"line items add up to {line_sum:.2f}, not the total {float(total):.2f}")
        return "; ".join(problems) or None


def run_checks(
    checks: Iterable[Any], output: Mapping[str, Any], model_input: Mapping[str, Any]
) -> list[tuple[str, str]]:
    """Every failed check as (code, reason), in declaration order."""
    failed: list[tuple[str, str]] = []
    for check in checks:
        try:
            reason = check(output, model_input)
        except Exception as exc:  # a check that cannot run is itself a reason to look
            reason = f"check {type(check).__name__} could not run: {exc}"
        if reason:
            failed.append((getattr(check, "code", type(check).__name__), reason))
    return failed


def _as_date(value: Any) -> date | None:
    if value is None or isinstance(value, date):
        return value
    try:
        return date.fromisoformat(str(value)[:10])
    except ValueError:
        return None


def _num(value: Any) -> str:
    number = float(value)
    return str(int(number)) if number.is_integer() else f"{number:g}"


def _quote(text: Any, limit: int = 80) -> str:
    text = " ".join(str(text).split())
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")
