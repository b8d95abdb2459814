"""Bulk reads of the ledger: the JSON columns of many items parsed at once, each item as stored."""

from __future__ import annotations

import pytest

from conveyor.ledger import ItemUpdate, NewItem, records

WF = "supplier_exceptions"

PAYLOADS = [
    {"notes": "Lieferung verspätet — «Zoll» 'quoted' \"double\" \\ backslash \t tab 日本語 😀", "n": 1},
    {"nested": {"list": [1, 2.5, None, True, {"deep": []}]}, "empty": {}, "n": 2},
    {"sql": "'; DROP TABLE x; --", "comma]": "],[", "n": 3},
    {"big": "x" * 100_000, "n": 4},
]
#: What each item's AI step wrote: nothing (SQL NULL), JSON null, a scalar, a list, an object.
RESULTS = [None, None, "plain text", [1, "two"], {"category": "late", "draft": "Ship the \"rest\"."}]


@pytest.fixture
def stored(ledger):
    """Items whose payloads and AI results take every JSON shape, one of them moved with JSON null."""
    items = [NewItem(f"PO-{n}", {**PAYLOADS[n % len(PAYLOADS)], "k": n}) for n in range(25)]
    ledger.receive(WF, "run-1", items, actor="test")
    ids = [f"{WF}:PO-{n}" for n in range(25)]
    ledger.transition(WF, ids, to_status="validated", from_status="received", actor="test")
    updates = {
        item_id: ItemUpdate(ai_result=RESULTS[n % len(RESULTS)], confidence=0.5)
        for n, item_id in enumerate(ids)
        if n % len(RESULTS)  # every fifth item keeps ai_result NULL
    }
    ledger.transition(WF, updates, to_status="ai_processed", from_status="validated", actor="test")
    return ids


def test_bulk_read_returns_every_item_as_the_single_item_read_does(ledger, stored, monkeypatch):
    monkeypatch.setattr(records, "_DECODE_ROWS", 4)  # several slices, the last one short

    listed = ledger.items(workflow=WF, run_id="run-1", limit=None)

    assert sorted(i.item_id for i in listed) == sorted(stored)
    for item in listed:
        assert item == ledger.get(item.item_id)  # the driver's own per-value parsing
    by_key = {i.business_key: i for i in listed}
    assert by_key["PO-0"].ai_result is None and by_key["PO-0"].status == "validated"
    assert by_key["PO-2"].ai_result == "plain text"
    assert by_key["PO-3"].ai_result == [1, "two"]
    assert by_key["PO-4"].ai_result == {"category": "late", "draft": 'Ship the "rest".'}
    assert by_key["PO-0"].payload == {**PAYLOADS[0], "k": 0}
    assert by_key["PO-3"].payload["big"] == "x" * 100_000
    assert set(by_key["PO-4"].stage_times) == {"received", "validated", "ai_processed"}


def test_decode_json_columns_keeps_other_columns_and_parses_null_as_none():
    rows = [("a", '{"x": [1, 2]}', None, 3), ("b", "null", '"s"', 4), ("c", "[]", "{}", 5)]

    assert records.decode_json_columns(rows, (1, 2)) == [
        ["a", {"x": [1, 2]}, None, 3],
        ["b", None, "s", 4],
        ["c", [], {}, 5],
    ]
    assert records.decode_json_columns([], (1, 2)) == []
