"""Non-atomic moves (``Ledger.transition(atomic=False)``): many chunks in two lanes at once."""

from __future__ import annotations

import threading

import psycopg
import pytest

from conveyor.ledger import IllegalTransition, NewItem, store

WF = "supplier_exceptions"


@pytest.fixture
def small_chunks(monkeypatch):
    monkeypatch.setattr(store, "CHUNK_SIZE", 10)  # 95 items: 10 chunks, two lanes of 5


def receive(ledger, count: int, run: str = "r1") -> list[str]:
    ledger.receive(WF, run, [NewItem(f"PO-{n:03d}", {"n": n}) for n in range(count)], actor="t")
    return [f"{WF}:PO-{n:03d}" for n in range(count)]


def audit_rows(ledger, to_status: str) -> int:
    with ledger.connect() as conn:
        return conn.execute(
            "SELECT count(*) FROM conveyor.transitions WHERE to_status = %s", (to_status,)
        ).fetchone()[0]


def test_two_lanes_move_every_item_once_with_its_audit_row_and_report_the_rest(ledger, small_chunks, monkeypatch):
    ids = receive(ledger, 95)
    ledger.transition(WF, ids[:3], to_status="quarantined", from_status="received", actor="gate")
    threads: set[str] = set()
    move_chunk = store.Ledger._move_chunk

    def recording(self, *args, **kwargs):
        threads.add(threading.current_thread().name)
        return move_chunk(self, *args, **kwargs)

    monkeypatch.setattr(store.Ledger, "_move_chunk", recording)

    result = ledger.transition(
        WF, [*ids, f"{WF}:PO-none"], to_status="validated", from_status="received", actor="t", atomic=False
    )

    assert len(threads) == 2  # two lanes, each in a thread (and a connection) of its own
    assert sorted(result.moved) == sorted(ids[3:]) and len(result.moved) == 92
    assert result.not_moved == {**{i: "quarantined" for i in ids[:3]}, f"{WF}:PO-none": None}
    assert ledger.count_by_status(workflow=WF, run_id="r1") == {"quarantined": 3, "validated": 92}
    assert audit_rows(ledger, "validated") == 92


def test_a_failed_lane_leaves_the_other_lanes_items_moved_and_a_repeat_moves_the_rest(
    ledger, small_chunks, monkeypatch
):
    ids = receive(ledger, 95)
    move_chunk = store.Ledger._move_chunk
    second_lane = set(ids[50:])

    def failing(self, conn, flow, chunk, *args, **kwargs):
        if chunk[0] in second_lane:
            raise psycopg.OperationalError("connection lost (injected)")
        return move_chunk(self, conn, flow, chunk, *args, **kwargs)

    monkeypatch.setattr(store.Ledger, "_move_chunk", failing)
    with pytest.raises(psycopg.OperationalError, match="injected"):
        ledger.transition(WF, ids, to_status="validated", from_status="received", actor="t", atomic=False)

    assert ledger.count_by_status(workflow=WF, run_id="r1") == {"received": 45, "validated": 50}
    assert audit_rows(ledger, "validated") == 50  # a moved item has its audit row, an unmoved one none

    monkeypatch.setattr(store.Ledger, "_move_chunk", move_chunk)
    again = ledger.transition(WF, ids, to_status="validated", from_status="received", actor="t", atomic=False)

    assert sorted(again.moved) == sorted(second_lane)
    assert set(again.not_moved) == set(ids[:50])
    assert ledger.count_by_status(workflow=WF, run_id="r1") == {"validated": 95}
    assert audit_rows(ledger, "validated") == 95


def test_the_default_move_stays_one_transaction(ledger, small_chunks, monkeypatch):
    ids = receive(ledger, 95)
    move_chunk = store.Ledger._move_chunk

    def failing(self, conn, flow, chunk, *args, **kwargs):
        if chunk[0] == ids[90]:  # the last chunk
            raise psycopg.OperationalError("connection lost (injected)")
        return move_chunk(self, conn, flow, chunk, *args, **kwargs)

    monkeypatch.setattr(store.Ledger, "_move_chunk", failing)
    with pytest.raises(psycopg.OperationalError):
        ledger.transition(WF, ids, to_status="validated", from_status="received", actor="t")

    assert ledger.count_by_status(workflow=WF, run_id="r1") == {"received": 95}
    assert audit_rows(ledger, "validated") == 0


def test_an_illegal_move_is_refused_before_any_lane_starts(ledger, small_chunks):
    ids = receive(ledger, 95)

    with pytest.raises(IllegalTransition):
        ledger.transition(WF, ids, to_status="published", from_status="received", actor="t", atomic=False)

    assert ledger.count_by_status(workflow=WF, run_id="r1") == {"received": 95}
