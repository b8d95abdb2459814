"""Several items in one LLM request: the batch's schema, its message, and reading its answer back.

Why: the cost of one request is largely fixed. The client spends 9-13 ms of CPU per request in
pydantic-ai and the OpenAI SDK (measured in ``bench/ai_step.py``), the system prompt is billed
once per request, and gateways limit requests, not items. With ``items_per_call = n`` the step
sends one request for n items: the items are numbered in the user turn (``### Item 1`` ...),
and the structured output is ``{"answers": [{"item": 1, <the task's fields>}, ...]}``.

What it costs: the model sees n items at once, so an answer can be swayed by its neighbours,
and one malformed answer holds up n items. The AI step contains both. Each answer is validated
on its own against the task's schema, and an item whose answer is missing, repeated or invalid
is sent again on its own. A whole batch that fails for a reason other than the endpoint being
unavailable is split into single requests. Confidence is read per answer: the label's tokens
within that answer's part of the text (log-probabilities), or agreement across k samples of the
batch.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

#: The field that numbers each answer of a batch.
ITEM_FIELD = "item"

BATCH_NOTE = (
    "\n\nYou are given several items at once, each under its own '### Item <number>' heading. "
    "Answer every item on its own, as if it were the only one: one entry per item in 'answers', "
    "in the order given, each with the item's number in 'item'."
)

_ITEM_KEY = re.compile(rf'"{ITEM_FIELD}"\s*:\s*(\d+)')


@lru_cache(maxsize=32)
def batch_schema(schema: type[BaseModel]) -> type[BaseModel]:
    """``{answers: [{item: int, <schema's fields>}]}``: the structured output of a batch request.

    The item number comes first in each answer, so a model writes it before the answer it labels.
    """
    if ITEM_FIELD in schema.model_fields:
        raise ValueError(f"{schema.__name__} has a field named {ITEM_FIELD!r}; it cannot be answered in batches")
    fields: dict[str, Any] = {
        ITEM_FIELD: (int, Field(description="The number of the item this answer is for.")),
        **{name: (info.annotation, info) for name, info in schema.model_fields.items()},
    }
    entry = create_model(
        f"{schema.__name__}Answer", __config__=ConfigDict(extra="forbid"), __doc__=schema.__doc__, **fields
    )
    return create_model(
        f"{schema.__name__}Batch",
        __config__=ConfigDict(extra="forbid"),
        __doc__=f"One answer per item, each with its item number. {schema.__doc__ or ''}".strip(),
        answers=(
            list[entry],  # type: ignore[valid-type]  # a model made at run time has no static type
            Field(description="One answer per item, in the order the items were given."),
        ),
    )


def batch_message(render: Any, inputs: Sequence[Mapping[str, Any]]) -> str:
    """The user turn of a batch: every item's own message under ``### Item <n>`` (1-based)."""
    return "\n\n".join(f"### Item {n}\n{render(data)}" for n, data in enumerate(inputs, start=1))


@dataclass
class BatchAnswer:
    """A batch's answer, read back per item number (1-based).

    :param outputs: item number -> the answer, valid against the task's schema (JSON-ready).
    :param problems: item number -> why its answer cannot be used (missing, repeated, invalid).
    :param spans: item number -> (start, end) of its answer in the text, for its log-probabilities.
    """

    outputs: dict[int, dict[str, Any]] = field(default_factory=dict)
    problems: dict[int, str] = field(default_factory=dict)
    spans: dict[int, tuple[int, int]] = field(default_factory=dict)


def read_batch(text: str, schema: type[BaseModel], count: int) -> BatchAnswer:
    """Split a batch's answer text into per-item answers.

    :raises ValueError: the text is not the batch's shape at all (not JSON, no ``answers`` list).
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"the answer is not JSON: {exc.msg} at character {exc.pos}") from None
    answers = data.get("answers") if isinstance(data, dict) else None
    if not isinstance(answers, list):
        raise ValueError("the answer has no 'answers' list")
    result = BatchAnswer()
    seen: set[int] = set()
    for entry in answers:
        number = entry.get(ITEM_FIELD) if isinstance(entry, dict) else None
        if not isinstance(number, int) or not 1 <= number <= count:
            continue  # an answer for no item given: nothing to attach it to
        if number in seen:
            result.outputs.pop(number, None)
            result.problems[number] = f"item {number} was answered more than once"
            continue
        seen.add(number)
        body = {k: v for k, v in entry.items() if k != ITEM_FIELD}
        try:
            result.outputs[number] = schema.model_validate(body).model_dump(mode="json")
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            where = ".".join(str(p) for p in first.get("loc", ())) or "(answer)"
            result.problems[number] = f"{where}: {first.get('msg')}"
    for number in range(1, count + 1):
        if number not in seen:
            result.problems[number] = f"item {number} was not answered"
    result.spans = answer_spans(text)
    return result


def answer_spans(text: str) -> dict[int, tuple[int, int]]:
    """Where each numbered answer sits in the text: from its ``"item": n`` to the next one.

    Relies on the item number being the first field of each answer (the schema's order, which
    structured output follows); a number that occurs twice gets no span.
    """
    marks = [(m.start(), int(m.group(1))) for m in _ITEM_KEY.finditer(text)]
    spans: dict[int, tuple[int, int]] = {}
    repeated: set[int] = set()
    for k, (start, number) in enumerate(marks):
        end = marks[k + 1][0] if k + 1 < len(marks) else len(text)
        if number in spans:
            repeated.add(number)
        spans[number] = (start, end)
    for number in repeated:
        del spans[number]
    return spans
