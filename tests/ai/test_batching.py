"""Reading a batch's answer back per item, and each answer's own log-probability confidence."""

from __future__ import annotations

import json
import math

import pytest
from pydantic import BaseModel

from conveyor.ai import confidence
from conveyor.ai.batching import ITEM_FIELD, batch_message, batch_schema, read_batch
from conveyor.ai.definitions import AITask
from conveyor_examples.invoices import InvoiceFields
from conveyor_examples.supplier_exceptions import ExceptionClassification


def answer(number: int, category: str = "quality") -> dict:
    return {"item": number, "category": category, "draft": f"Supplier X, PO-{number}: damaged goods, EUR 10."}


def test_the_batch_schema_numbers_each_answer_first_and_keeps_nested_definitions():
    schema = batch_schema(InvoiceFields).model_json_schema()
    entry = schema["$defs"]["InvoiceFieldsAnswer"]
    assert list(entry["properties"])[0] == ITEM_FIELD
    assert set(entry["required"]) == {ITEM_FIELD, *InvoiceFields.model_fields}
    assert entry["additionalProperties"] is False and "LineItem" in schema["$defs"]

    class Clashing(BaseModel):
        item: str

    with pytest.raises(ValueError, match="has a field named 'item'"):
        batch_schema(Clashing)


def test_the_message_puts_every_item_under_its_own_numbered_heading():
    text = batch_message(AITask.user_message, [{"po": "PO-1"}, {"po": "PO-2"}])
    assert text == "### Item 1\npo: PO-1\n\n### Item 2\npo: PO-2"


def test_answers_are_read_per_item_and_the_unusable_ones_are_named():
    text = json.dumps(
        {
            "answers": [
                answer(1),
                {"item": 2, "category": "not_a_category", "draft": "x"},
                answer(3),
                answer(3, "other"),
                answer(9),  # an item that was not asked
                "not an object",
            ]
        }
    )
    read = read_batch(text, ExceptionClassification, 4)
    assert list(read.outputs) == [1]
    assert read.outputs[1]["category"] == "quality"
    assert read.problems[2].startswith("category: Input should be")
    assert read.problems[3] == "item 3 was answered more than once"
    assert read.problems[4] == "item 4 was not answered"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"answers": [{"item": 1, "cat', "the answer is not JSON"),
        ('{"answer": "fine"}', "the answer has no 'answers' list"),
        ("[]", "the answer has no 'answers' list"),
    ],
)
def test_an_answer_that_is_not_a_batch_at_all_raises(text, message):
    with pytest.raises(ValueError, match=message):
        read_batch(text, ExceptionClassification, 2)


def test_each_answer_gets_the_probability_of_its_own_label_tokens():
    text = json.dumps({"answers": [answer(1, "quality"), answer(2, "other")]})
    tokens = [{"token": t, "logprob": -0.001} for t in text]  # one character per token
    second = text.index('"other"') + 1
    tokens[second]["logprob"] = -1.5
    spans = read_batch(text, ExceptionClassification, 2).spans

    first_p, second_p = confidence.from_logprobs_within(text, tokens, "category", spans).values()

    assert first_p == pytest.approx(math.exp(-0.001 * len("quality")))
    assert second_p == pytest.approx(math.exp(-1.5 - 0.001 * (len("other") - 1)))
    # without a label field: the geometric mean over the answer's own tokens only
    means = confidence.from_logprobs_within(text, tokens, None, spans)
    length = spans[2][1] - spans[2][0]
    assert means[1] == pytest.approx(math.exp(-0.001))
    assert means[2] == pytest.approx(math.exp((-1.5 - 0.001 * (length - 1)) / length))
    # tokens that start before the answer (a leading newline): the parts are shifted to match
    shifted = confidence.from_logprobs_within(text, [{"token": "\n", "logprob": -3.0}, *tokens], "category", spans)
    assert list(shifted.values()) == [pytest.approx(first_p), pytest.approx(second_p)]
    # no log-probabilities from the endpoint: no confidence, for every answer
    assert confidence.from_logprobs_within(text, [], "category", spans) == {1: None, 2: None}
