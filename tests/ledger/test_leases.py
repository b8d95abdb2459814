"""Step leases: chunks of a run's waiting items handed to sharded steps, each item to one holder."""

from __future__ import annotations

import threading
import time

from conveyor.ledger import NewItem
from conveyor.ledger.leases import CLAIM, Holder, params
from tests.support.plans import plan_nodes

WF = "supplier_exceptions"
STEP = "classify"
A1 = Holder("dag/r1/classify/0", 1)
A2 = Holder("dag/r1/classify/0", 2)  # the retry of shard 0
B1 = Holder("dag/r1/classify/1", 1)


def _seed(ledger, count: int, run_id: str = "r1") -> list[str]:
    items = [NewItem(f"K-{n:05d}", {"n": n}) for n in range(count)]
    ledger.receive(WF, run_id, items, actor="t")
    return sorted(f"{WF}:{i.business_key}" for i in items)


def _claim(ledger, holder: Holder, limit: int = 10, lease_seconds: float = 60.0, run_id: str = "r1"):
    return ledger.claim_chunk(
        workflow=WF, run_id=run_id, status="received", step=STEP, holder=holder, limit=limit,
        lease_seconds=lease_seconds,
    )


def test_live_leases_keep_items_from_siblings_and_from_the_attempt_that_holds_them(ledger):
    ids = _seed(ledger, 25)

    a = _claim(ledger, A1)
    b = _claim(ledger, B1)
    assert len(a.item_ids) == len(b.item_ids) == 10 and not set(a.item_ids) & set(b.item_ids)
    assert a.item_ids == sorted(a.item_ids)
    rest = _claim(ledger, A1)  # its own live leases are not handed back to the attempt holding them
    assert len(rest.item_ids) == 5 and not set(rest.item_ids) & set(a.item_ids + b.item_ids)
    assert _claim(ledger, A1).item_ids == [] and _claim(ledger, B1).item_ids == []
    assert sorted(a.item_ids + b.item_ids + rest.item_ids) == ids
    assert ledger.leased_elsewhere(workflow=WF, run_id="r1", status="received", step=STEP, holder=B1) == 15


def test_a_retry_of_the_same_shard_re_takes_its_leases_at_once_a_sibling_only_after_expiry(ledger):
    _seed(ledger, 10)
    first = _claim(ledger, A1, lease_seconds=0.5)
    assert len(first.item_ids) == 10

    assert _claim(ledger, B1).item_ids == []  # live: the sibling waits
    retry = _claim(ledger, A2, lease_seconds=0.5)
    assert retry.item_ids == first.item_ids  # the same shard's retry: at once, whatever the expiry

    time.sleep(0.7)
    taken = _claim(ledger, B1)  # expired: a sibling takes them over
    assert taken.item_ids == first.item_ids
    assert _claim(ledger, A2).item_ids == []  # B's lease is live now


def test_items_that_moved_are_not_claimed_and_released_leases_are_gone(ledger):
    _seed(ledger, 10)
    a = _claim(ledger, A1, limit=4)
    ledger.transition(WF, a.item_ids[:2], to_status="validated", from_status="received", actor="t")
    assert ledger.release_leases(STEP, A1, a.item_ids[:2]) == 2
    assert ledger.renew_leases(STEP, A1, 60) == 2
    b = _claim(ledger, B1, limit=100)
    assert len(b.item_ids) == 6 and not set(b.item_ids) & set(a.item_ids)
    assert ledger.release_leases(STEP, A1) == 2
    assert _claim(ledger, B1, limit=100).item_ids == a.item_ids[2:]  # released while waiting: B takes them
    with ledger.connect() as conn:
        (left,) = conn.execute("SELECT count(*) FROM conveyor.step_leases WHERE holder = %s", (A1.name,)).fetchone()
    assert left == 0


def test_concurrent_claims_hand_every_item_to_exactly_one_holder(ledger):
    ids = _seed(ledger, 3000)
    got: dict[str, list[str]] = {}
    errors: list[BaseException] = []

    def shard(n: int) -> None:
        holder = Holder(f"dag/r1/classify/{n}", 1)
        mine: list[str] = []
        try:
            while True:
                claim = _claim(ledger, holder, limit=25)
                if not claim.item_ids and not claim.picked:
                    break
                mine += claim.item_ids
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        got[holder.name] = mine

    threads = [threading.Thread(target=shard, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors
    claimed = [i for mine in got.values() for i in mine]
    assert len(claimed) == len(set(claimed)) == 3000 and sorted(claimed) == ids
    assert all(got.values()), {k: len(v) for k, v in got.items()}  # every holder got work


def test_the_claim_reads_the_runs_items_by_index_when_statistics_say_none_wait(ledger):
    """At millions of finished items whose statistics predate the run, the claim must not scan
    the items table: it reads the run's waiting items through (workflow, run_id, status)."""
    with ledger.connect() as conn:
        conn.execute(
            "INSERT INTO conveyor.items (item_id, workflow, business_key, run_id, status, payload, input_hash)"
            " SELECT 'supplier_exceptions:OLD-' || n, 'supplier_exceptions', 'OLD-' || n, 'run-' || (n / 500),"
            " 'published', '{}'::jsonb, md5(n::text) FROM generate_series(1, 200000) AS n"
        )
        conn.execute(
            "INSERT INTO conveyor.step_leases (step, item_id, workflow, holder, attempt, expires_at)"
            " SELECT 'classify', 'supplier_exceptions:OLD-' || n, 'supplier_exceptions', 'h', 1, now()"
            " FROM generate_series(1, 20000) AS n"
        )
        conn.execute("ANALYZE conveyor.item_states, conveyor.item_bodies")
        conn.execute("ANALYZE conveyor.step_leases")
    _seed(ledger, 2000, run_id="today")
    args = params(workflow=WF, run_id="today", status="received", step=STEP, holder=A1, limit=200,
                  lease_seconds=60)
    with ledger.connect() as conn:
        (plan,) = conn.execute("EXPLAIN (FORMAT JSON) " + CLAIM, args).fetchone()
    nodes = list(plan_nodes(plan[0]["Plan"]))
    scans = [(n["Node Type"], n.get("Relation Name"), n.get("Index Name")) for n in nodes if "Scan" in n["Node Type"]]
    assert not [s for s in scans if s[0] == "Seq Scan" and s[1] in ("item_states", "step_leases")], scans
    assert ("item_states", "item_states_workflow_run_status") in [(s[1], s[2]) for s in scans], scans
    assert len(_claim(ledger, A1, limit=200, run_id="today").item_ids) == 200
