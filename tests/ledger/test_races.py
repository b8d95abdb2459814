"""Two processes racing on the same items: every item moves exactly once."""

from __future__ import annotations

import multiprocessing as mp

from conveyor.ledger import NewItem

WF = "supplier_exceptions"
N = 6_000


def _race(dsn: str, item_ids: list[str], actor: str, start, out) -> None:
    from conveyor.ledger import Ledger

    ledger = Ledger(dsn)
    start.wait()
    result = ledger.transition(WF, item_ids, to_status="validated", from_status="received", actor=actor)
    out.put((actor, result.moved, result.not_moved))


def test_two_processes_move_each_item_exactly_once(ledger, ledger_dsn):
    ids = [f"{WF}:PO-{n:05d}" for n in range(N)]
    ledger.receive(WF, "race", [NewItem(i.split(":")[1], {"n": i}) for i in ids], actor="t")
    ctx = mp.get_context("spawn")
    start, out = ctx.Barrier(2), ctx.Queue()
    # Opposite orders make the two statements meet in the middle of the set.
    workers = [
        ctx.Process(target=_race, args=(ledger_dsn, ids, "worker-a", start, out)),
        ctx.Process(target=_race, args=(ledger_dsn, list(reversed(ids)), "worker-b", start, out)),
    ]
    for w in workers:
        w.start()
    results = {actor: (set(moved), not_moved) for actor, moved, not_moved in (out.get(timeout=120) for _ in workers)}
    for w in workers:
        w.join(timeout=30)
        assert w.exitcode == 0

    moved_a, not_moved_a = results["worker-a"]
    moved_b, not_moved_b = results["worker-b"]
    assert moved_a.isdisjoint(moved_b)
    assert moved_a | moved_b == set(ids)
    # The loser of each item learns it did not move it and where it is now.
    assert set(not_moved_a) == moved_b and set(not_moved_b) == moved_a
    assert set(not_moved_a.values()) <= {"validated"}
    with ledger.connect() as conn:
        per_item = conn.execute(
            "SELECT count(*) FILTER (WHERE to_status = 'validated'), count(DISTINCT item_id)"
            " FROM conveyor.transitions WHERE to_status = 'validated'"
        ).fetchone()
        stale = conn.execute(
            "SELECT count(*) FROM conveyor.items i WHERE i.status <> (SELECT t.to_status FROM conveyor.transitions t"
            " WHERE t.item_id = i.item_id ORDER BY t.id DESC LIMIT 1)"
        ).fetchone()
    assert per_item == (N, N)
    assert stale == (0,)


def _decide(dsn: str, item_id: str, actor: str, target: str, start, out) -> None:
    from conveyor.ledger import Ledger

    ledger = Ledger(dsn)
    start.wait()
    result = ledger.transition(WF, [item_id], to_status=target, from_status="pending_review", actor=actor)
    out.put((actor, result.moved, result.not_moved))


def test_two_concurrent_decisions_on_one_item_one_wins(ledger, ledger_dsn):
    ledger.receive(WF, "r", [NewItem("PO-1", {"a": 1})], actor="t")
    item = f"{WF}:PO-1"
    ledger.transition(WF, [item], to_status="validated", actor="t")
    ledger.transition(WF, [item], to_status="pending_review", actor="t")
    ctx = mp.get_context("spawn")
    start, out = ctx.Barrier(2), ctx.Queue()
    workers = [
        ctx.Process(target=_decide, args=(ledger_dsn, item, "reviewer:ana", "ai_processed", start, out)),
        ctx.Process(target=_decide, args=(ledger_dsn, item, "reviewer:bo", "rejected", start, out)),
    ]
    for w in workers:
        w.start()
    results = [out.get(timeout=60) for _ in workers]
    for w in workers:
        w.join(timeout=30)

    winners = [actor for actor, moved, _ in results if moved]
    assert len(winners) == 1
    loser = next(not_moved for _, moved, not_moved in results if not moved)
    final = ledger.get(item).status
    assert loser == {item: final}
    assert ledger.history(item)[-1].actor == winners[0]


def test_a_move_that_loses_a_deadlock_is_retried_in_lock_order_and_loses_nothing(ledger, ledger_dsn):
    import threading
    import time

    import psycopg

    ids = [f"{WF}:PO-{n}" for n in (1, 2)]
    ledger.receive(WF, "r", [NewItem(i.split(":")[1], {"n": i}) for i in ids], actor="t")
    first, second = ids
    with psycopg.connect(ledger_dsn, autocommit=False) as other:
        # Another writer holds the second item, and will ask for the first one once the move holds
        # it. It waits longer before checking for deadlocks, so the server picks the move's
        # statement as the victim.
        other.execute("SET deadlock_timeout = '10s'")
        other.execute("SELECT 1 FROM conveyor.item_states WHERE item_id = %s FOR UPDATE", (second,))
        moved: list = []
        mover = threading.Thread(
            target=lambda: moved.append(
                ledger.transition(WF, ids, to_status="validated", from_status="received", actor="mover")
            )
        )
        mover.start()
        with psycopg.connect(ledger_dsn, autocommit=True) as watcher:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:  # until the move waits for the second item's lock
                waiting = watcher.execute(
                    "SELECT count(*) FROM pg_stat_activity"
                    " WHERE wait_event_type = 'Lock' AND datname = current_database()"
                ).fetchone()
                if waiting and waiting[0]:
                    break
                time.sleep(0.02)
            assert waiting and waiting[0], "the move never waited for the other writer's lock"
        # The other writer cancels the first item (the move holds its row: this closes the cycle).
        other.execute(
            "UPDATE conveyor.items SET status = 'cancelled' WHERE item_id = %s AND status = 'received'", (first,)
        )
        other.commit()
        mover.join(timeout=30)

    (result,) = moved
    assert result.moved == [second]
    assert result.not_moved == {first: "cancelled"}
    assert ledger.get(second).status == "validated"
    history = [(t.from_status, t.to_status) for t in ledger.history(second)]
    assert history == [(None, "received"), ("received", "validated")]
    assert [t.to_status for t in ledger.history(first)] == ["received"]  # the other writer wrote no audit row
