"""The quarantine detail is the gate's word to review: what it writes, review reads back typed,
from this version's ledgers and from older ones."""

from __future__ import annotations

import json

from conveyor.quarantine import ColumnContract, InputContract, QuarantineDetail, RecordedCheck


def test_what_the_gate_writes_reads_back_the_same_through_json():
    detail = QuarantineDetail(
        gate="validate_input", suite="supplier_exceptions", field="payload",
        checks=(RecordedCheck("supplier_id", "expect_column_values_to_not_be_null", "supplier_id is empty", False),
                RecordedCheck("amount", "expect_column_values_to_be_between", "amount above 10000", True)),
        contract=InputContract({"amount": ColumnContract("number"), "due": ColumnContract("date", "%d/%m/%Y")},
                               ("supplier_id",)),
    )  # fmt: skip
    stored = json.loads(json.dumps(detail.as_json()))  # as the audit row's jsonb holds it
    assert stored["contract"]["columns"]["due"] == {"type": "date", "format": "%d/%m/%Y"}
    assert QuarantineDetail.from_json(stored) == detail
    assert detail.failing_columns == {"supplier_id", "amount"}


def test_an_older_or_damaged_detail_reads_as_what_it_holds_and_nothing_more():
    # A ledger from before contracts and waivers: no contract, every check waivable as then.
    old = QuarantineDetail.from_json({"gate": "gate", "checks": [{"column": "amount", "message": "not a number"}]})
    assert old.contract is None and old.field == "payload" and old.checks[0].waivable
    assert QuarantineDetail.from_json(None) == QuarantineDetail()
    damaged = QuarantineDetail.from_json({"field": "elsewhere", "checks": "x", "contract": {"columns": [1]}})
    assert damaged == QuarantineDetail(contract=InputContract())
