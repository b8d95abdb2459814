"""Numbers as people type them into a correction (conveyor.review.numbers), and the suites that
declare which currency a person may type with an amount."""

from __future__ import annotations

import json

import pytest

from conveyor.gate.contract import contract_of
from conveyor.gate.errors import SuiteError
from conveyor.gate.suites import load_suite
from conveyor.review.coercion import coerce_changes
from conveyor.review.errors import InvalidDecision
from conveyor.review.numbers import NotANumber, typed_number

CHECKS = [{"type": "expect_column_to_exist", "kwargs": {"column": "total"}}]


@pytest.mark.parametrize(
    ("typed", "currency", "number"),
    [
        ("1936.40", None, 1936.4),
        ("1.936,40", None, 1936.4),
        ("1,936.40", None, 1936.4),
        ("1 936,40", None, 1936.4),
        ("1\u202f936,40", None, 1936.4),
        ("1'936.40", None, 1936.4),
        ("1936,40", None, 1936.4),
        ("0,5", None, 0.5),
        ("1.234.567", None, 1234567.0),
        ("1,234,567", None, 1234567.0),
        (" 12,50- ", None, -12.5),
        ("-12.50", None, -12.5),
        ("R$ 1.936,40", "BRL", 1936.4),
        ("R$ -12,50", "BRL", -12.5),
        ("1.936,40 €", "EUR", 1936.4),
        ("EUR 12", "EUR", 12.0),
        ("12 kr", "SEK", 12.0),
        ("1.936", None, 1.936),  # what an API client sends for one point nine three six
    ],
)
def test_a_number_people_write_is_read_as_they_meant_it(typed, currency, number):
    assert typed_number(typed, currency) == number


@pytest.mark.parametrize(
    ("typed", "currency", "words"),
    [
        ("1,936", None, "could be 1936 or 1.936"),
        ("R$ 12", "EUR", "this item's amount is in EUR"),
        ("USD 12", "EUR", "'USD'"),
        ("$12", None, "declares no currency"),
        ("€ 12 €", "EUR", "two currency marks"),
        ("twelve", None, "is not a number"),
        ("12 apples", None, "is not a number"),
        ("1.2.3", None, "is not a number"),
        ("  ", None, "is empty"),
    ],
)
def test_what_is_not_certainly_a_number_is_refused_saying_why(typed, currency, words):
    with pytest.raises(NotANumber, match=words):
        typed_number(typed, currency)


def test_the_bundled_suites_let_a_person_type_the_rows_own_currency():
    contract = contract_of(load_suite("supplier_exceptions"))
    assert contract.columns["amount"].currency_column == "currency"
    row = {"amount": "12,50", "currency": "BRL"}
    assert coerce_changes({"amount": "R$ 1.936,40"}, contract, row) == {"amount": 1936.4}
    # The currency corrected with the amount: the new one is what the amount is read in.
    assert coerce_changes({"amount": "£ 5", "currency": "GBP"}, contract, row) == {"amount": 5.0, "currency": "GBP"}
    with pytest.raises(InvalidDecision, match="amount expects a number: 'R\\$ 5' is in 'R\\$', but .* in GBP"):
        coerce_changes({"amount": "R$ 5"}, contract, {**row, "currency": "GBP"})
    # The contract as the gate records it with each quarantine, and read back by the API server.
    recorded = type(contract).from_json(json.loads(json.dumps(contract.as_json())))
    assert recorded == contract


def test_a_suite_declaring_a_currency_wrongly_is_refused_naming_the_column(tmp_path):
    def suite(columns):
        path = tmp_path / "s.json"
        path.write_text(json.dumps({"name": "s", "expectations": CHECKS, "meta": {"conveyor": {"columns": columns}}}))
        return path

    with pytest.raises(SuiteError, match="'total' reads its currency from 'curr'"):
        load_suite(str(suite({"total": {"type": "number", "currency_column": "curr"}})))
    with pytest.raises(SuiteError, match="'total' has currency 'euro'"):
        load_suite(str(suite({"total": {"type": "number", "currency": "euro"}})))
    with pytest.raises(SuiteError, match="'name' declares a currency but is 'string'"):
        load_suite(str(suite({"name": {"type": "string", "currency": "EUR"}})))
