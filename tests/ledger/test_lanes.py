"""Non-atomic moves (``Ledger.transition(atomic=False)``): many chunks in two lanes at once."""

from __future__ import annotations

import psycopg
import pytest

from conveyor.ledger import IllegalTransition, NewItem, transitions

WF = "supplier_exceptions"


@pytest.fixture
def small_chunks(monkeypatch):
    monkeypatch.setattr(transitions, "CHUNK_SIZE", 10)  # 95 items: 10 chunks, two lanes of 5


@pytest.fixture
def failing_moves(ledger):
    """A real server-side failure: moving items at or after ``from_id`` to validated raises in PostgreSQL."""
    made = []

    def fail_from(from_id: str) -> None:
        with ledger.connect() as conn:
            conn.execute(
                "CREATE FUNCTION conveyor.test_lost_lane() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
                f" IF NEW.status = 'validated' AND NEW.item_id >= '{from_id}' THEN RAISE EXCEPTION 'lost (injected)';"
                " END IF; RETURN NEW; END $$"
            )
            conn.execute(
                "CREATE TRIGGER test_lost_lane BEFORE UPDATE ON conveyor.item_states"
                " FOR EACH ROW EXECUTE FUNCTION conveyor.test_lost_lane()"
            )
        made.append(True)

    yield fail_from
    if made:
        heal(ledger)


def heal(ledger) -> None:
    with ledger.connect() as conn:
        conn.execute("DROP TRIGGER IF EXISTS test_lost_lane ON conveyor.item_states")
        conn.execute("DROP FUNCTION IF EXISTS conveyor.test_lost_lane()")


def receive(ledger, count: int, run: str = "r1") -> list[str]:
    ledger.receive(WF, run, [NewItem(f"PO-{n:03d}", {"n": n}) for n in range(count)], actor="t")
    return [f"{WF}:PO-{n:03d}" for n in range(count)]


def audit_rows(ledger, to_status: str) -> tuple[int, int]:
    """(audit rows moving to ``to_status``, the transactions that wrote them: ``at`` is the
    transaction's start, the same for each of its savepoints)."""
    with ledger.connect() as conn:
        return conn.execute(
            "SELECT count(*), count(DISTINCT at) FROM conveyor.transitions WHERE to_status = %s",
            (to_status,),
        ).fetchone()


def lane_transactions(ledger, item_ids: list[str]) -> int:
    """How many transactions wrote the audit rows moving ``item_ids`` to validated."""
    with ledger.connect() as conn:
        return conn.execute(
            "SELECT count(DISTINCT at) FROM conveyor.transitions WHERE to_status = 'validated' AND item_id = ANY(%s)",
            (item_ids,),
        ).fetchone()[0]


def test_two_lanes_move_every_item_once_with_its_audit_row_and_report_the_rest(ledger, small_chunks):
    ids = receive(ledger, 95)
    ledger.transition(WF, ids[:3], to_status="quarantined", from_status="received", actor="gate")

    result = ledger.transition(
        WF, [*ids, f"{WF}:PO-none"], to_status="validated", from_status="received", actor="t", atomic=False
    )

    assert sorted(result.moved) == sorted(ids[3:]) and len(result.moved) == 92
    assert result.not_moved == {**{i: "quarantined" for i in ids[:3]}, f"{WF}:PO-none": None}
    assert ledger.count_by_status(workflow=WF, run_id="r1") == {"quarantined": 3, "validated": 92}
    assert audit_rows(ledger, "validated")[0] == 92  # one audit row per item
    # ... written by two transactions, one per lane (``at`` is a transaction's start: two lanes started
    # in the same microsecond share it, so each lane's rows are counted apart)
    assert lane_transactions(ledger, ids[:50]) == 1 and lane_transactions(ledger, ids[50:]) == 1


def test_a_failed_lane_leaves_the_other_lanes_items_moved_and_a_repeat_moves_the_rest(
    ledger, small_chunks, failing_moves
):
    ids = receive(ledger, 95)
    second_lane = ids[50:]
    failing_moves(second_lane[0])
    with pytest.raises(psycopg.Error, match="injected"):
        ledger.transition(WF, ids, to_status="validated", from_status="received", actor="t", atomic=False)

    assert ledger.count_by_status(workflow=WF, run_id="r1") == {"received": 45, "validated": 50}
    assert audit_rows(ledger, "validated")[0] == 50  # a moved item has its audit row, an unmoved one none

    heal(ledger)
    again = ledger.transition(WF, ids, to_status="validated", from_status="received", actor="t", atomic=False)

    assert sorted(again.moved) == sorted(second_lane)
    assert set(again.not_moved) == set(ids[:50])
    assert ledger.count_by_status(workflow=WF, run_id="r1") == {"validated": 95}
    assert audit_rows(ledger, "validated")[0] == 95


def test_the_default_move_stays_one_transaction(ledger, small_chunks, failing_moves):
    ids = receive(ledger, 95)
    failing_moves(ids[90])  # the last chunk

    with pytest.raises(psycopg.Error, match="injected"):
        ledger.transition(WF, ids, to_status="validated", from_status="received", actor="t")

    assert ledger.count_by_status(workflow=WF, run_id="r1") == {"received": 95}
    assert audit_rows(ledger, "validated") == (0, 0)
    heal(ledger)
    ledger.transition(WF, ids, to_status="validated", from_status="received", actor="t")
    assert audit_rows(ledger, "validated") == (95, 1)


def test_an_illegal_move_is_refused_before_any_lane_starts(ledger, small_chunks):
    ids = receive(ledger, 95)

    with pytest.raises(IllegalTransition):
        ledger.transition(WF, ids, to_status="published", from_status="received", actor="t", atomic=False)

    assert ledger.count_by_status(workflow=WF, run_id="r1") == {"received": 95}
