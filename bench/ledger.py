"""Ledger write and lookup speed, measured side by side in one run.

1. The write job, old code beside new: 100k items received, then moved through four statuses
   (received → validated → ai_processed → approved → published), each a set-based guarded move
   with its audit rows; the same four moves with ``atomic=False`` (two lanes, as promote and
   publish make them) apart. The old side is ``--old``'s ``src`` (``git archive``), the new side
   this tree, each in a process of its own on a fresh database, twice in turn. Against a raw
   ``COPY`` of the same 100k rows into a table of the old item row's shape and indexes on the
   same server, and with the WAL the server wrote (from a checkpoint, so both sides pay the same
   full-page images). RATIO lines: the write job and the moves new/old, job/COPY, WAL per item
   per move and per received item.
2. ``conveyor status``: the whole process (interpreter start included) with N million items in
   the ledger (default 10M; ``--status-rows`` to change). Goal ≤ 0.5 s. ``conveyor items
   --workflow W`` without ``--run`` on the same items: goal ≤ 0.3 s. Also the move of a new
   run's 10k items on top of them (statistics taken before they arrived), which must stay as fast
   as on an empty ledger.

Run: ``.venv/bin/python bench/ledger.py [--items 100000] [--status-rows 10000000] [--old COMMIT]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _pg import drop, scratch_database

from conveyor import Workflow
from conveyor.ledger import Ledger, NewItem
from conveyor.ledger.hashing import canonical_json, input_hash
from tests.support.previous_release import PREVIOUS_RELEASE, unpack_src  # on the path through _pg

REPO = Path(__file__).resolve().parents[1]
WF = "supplier_exceptions"
CHAIN = ["validated", "ai_processed", "approved", "published"]
FLOW = Workflow(name=WF, source_field="supplier_id")


def payload(n: int) -> dict[str, object]:
    return {
        "exception_id": f"EX-{n:08d}",
        "supplier_id": f"SUP-{n % 97:04d}",
        "amount": round(n * 1.37 % 10_000, 2),
        "notes": f"Delivery {n} arrived three days late; 12 cartons short of the order.",
    }


_QUEUE = "WHERE status IN ('quarantined', 'pending_review', 'pending_approval')"
_BASELINE_INDEXES = (
    "ALTER TABLE conveyor.copy_baseline ADD PRIMARY KEY (item_id)",
    "CREATE INDEX ON conveyor.copy_baseline (workflow, run_id, status)",
    "CREATE INDEX ON conveyor.copy_baseline (business_key)",
    f"CREATE INDEX ON conveyor.copy_baseline (workflow, updated_at) {_QUEUE}",
    f"CREATE INDEX ON conveyor.copy_baseline (priority DESC, updated_at) {_QUEUE}",
    "CREATE INDEX ON conveyor.copy_baseline (workflow, updated_at DESC, item_id)",
)


def wal_lsn(ledger: Ledger) -> str:
    with ledger.connect() as conn:
        row = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
        assert row is not None
        return str(row[0])


def wal_bytes(ledger: Ledger, since: str) -> int:
    """WAL written by the whole server since ``since`` (this bench is its only writer that matters)."""
    with ledger.connect() as conn:
        row = conn.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s::pg_lsn)::bigint", (since,)).fetchone()
        assert row is not None
        return int(row[0])


def measure_transitions(dsn: str, count: int) -> dict[str, object]:
    """One side's write job on a fresh ledger: the raw COPY, receive, the four moves (one
    transaction each, then atomic=False in two lanes), with the WAL of receive and of the moves."""
    ledger = Ledger(dsn)
    ledger.upgrade()
    ledger.declare(FLOW, actor="bench")
    items = [NewItem(f"EX-{n:08d}", payload(n)) for n in range(count)]

    with ledger.connect() as conn:
        # The baseline is the same table on both sides: the item row of the old schema, its indexes.
        conn.execute("CREATE TABLE conveyor.copy_baseline AS SELECT * FROM conveyor.items WITH NO DATA")
        for index in _BASELINE_INDEXES:
            conn.execute(index)
    rows = [(f"{WF}:{i.business_key}", WF, i.business_key, "bench", "received", canonical_json(i.payload),
             input_hash(i.payload)) for i in items]
    started = time.perf_counter()
    with ledger.connect() as conn, conn.cursor() as cur:
        with cur.copy("COPY conveyor.copy_baseline (item_id, workflow, business_key, run_id, status, payload,"
                      " input_hash) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
    copy_seconds = time.perf_counter() - started

    with ledger.connect() as conn:
        conn.execute("CHECKPOINT")  # each side's WAL starts at a checkpoint: the same full-page images
    since = wal_lsn(ledger)
    started = time.perf_counter()
    ledger.receive(WF, "bench", items, actor="bench")
    receive_seconds = time.perf_counter() - started
    receive_wal = wal_bytes(ledger, since)

    ids = [f"{WF}:{i.business_key}" for i in items]
    timings = []
    previous = "received"
    since = wal_lsn(ledger)
    for status in CHAIN:
        started = time.perf_counter()
        result = ledger.transition(WF, ids, to_status=status, from_status=previous, actor="bench")
        timings.append(time.perf_counter() - started)
        assert len(result.moved) == count, (status, len(result.moved))
        previous = status
    move_wal = wal_bytes(ledger, since)

    # The same four moves as the steps that repeat a move until done make them (promote, publish:
    # atomic=False, two lanes at once), on a second run of the same rows.
    lane_ids = [f"{WF}:LN-{i.business_key}" for i in items]
    ledger.receive(WF, "lanes", [NewItem(f"LN-{i.business_key}", i.payload) for i in items], actor="bench")
    lane_timings = []
    previous = "received"
    for status in CHAIN:
        started = time.perf_counter()
        result = ledger.transition(WF, lane_ids, to_status=status, from_status=previous, actor="bench", atomic=False)
        lane_timings.append(time.perf_counter() - started)
        assert len(result.moved) == count, (status, len(result.moved))
        previous = status
    import conveyor

    return {
        "code": str(Path(conveyor.__file__).parents[1]),
        "copy": copy_seconds,
        "receive": receive_seconds,
        "moves": timings,
        "lanes": lane_timings,
        "receive_wal_per_item": receive_wal / count,
        "wal_per_item_per_move": move_wal / count / len(CHAIN),
    }


def bench_transitions(count: int, old_ref: str, name: str) -> None:
    """Old code (``old_ref``'s ``src``, unpacked by ``git archive``) beside this tree's, each in a
    process of its own on a fresh database, twice in turn; the better of each side's two runs."""
    runs: dict[str, list[dict]] = {"old": [], "new": []}
    with tempfile.TemporaryDirectory() as folder:
        trees = {"old": unpack_src(Path(folder), old_ref), "new": REPO / "src"}
        for turn in range(2):
            for side, tree in trees.items():
                database = f"{name}_{side}{turn}"
                dsn = scratch_database(database)
                try:
                    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tree), str(REPO / "bench")]))
                    done = subprocess.run(
                        [sys.executable, __file__, "--measure", dsn, "--items", str(count)],
                        env=env, capture_output=True, text=True, check=False,
                    )
                    if done.returncode != 0:
                        raise SystemExit(f"the {side} side failed:\n{done.stderr[-3000:]}")
                    runs[side].append(json.loads(done.stdout.strip().splitlines()[-1]))
                finally:
                    drop(database)
    best = {side: min(found, key=lambda r: sum(r["moves"])) for side, found in runs.items()}
    assert best["new"]["code"] == str(REPO / "src") and best["old"]["code"] != best["new"]["code"], best
    print(f"old code: {old_ref} (git archive), new code: this tree; {count:,} items, better of two runs each")
    for side in ("old", "new"):
        r = best[side]
        rate = count * len(CHAIN) / sum(r["moves"])
        print(
            f"{side}: COPY {r['copy']:.2f} s, receive {r['receive']:.2f} s, four moves {sum(r['moves']):.2f} s "
            f"({rate:,.0f} items/s; " + ", ".join(f"{s:.2f}" for s in r["moves"]) + "), two lanes "
            f"{sum(r['lanes']):.2f} s; WAL: receive {r['receive_wal_per_item']:,.0f} B/item, "
            f"a move {r['wal_per_item_per_move']:,.0f} B/item"
        )
    old, new = best["old"], best["new"]

    def job(r: dict) -> float:  # receive + the four moves: the whole write job
        return r["receive"] + sum(r["moves"])

    print(f"RATIO write_job new/old = {job(old) / job(new):.2f}  (speed-up; goal >= 2.5)")
    print(f"RATIO moves new/old = {sum(old['moves']) / sum(new['moves']):.2f}  (speed-up of the four moves)")
    print(f"RATIO moves_two_lanes new/old = {sum(old['lanes']) / sum(new['lanes']):.2f}")
    # The issue's measure: the COPY of the items' rows against the whole job on the same items.
    print(f"RATIO job/COPY = {new['copy'] / job(new):.3f}  (old {old['copy'] / job(old):.3f}; goal >= 0.15)")
    print(f"RATIO receive/COPY = {new['copy'] / new['receive']:.2f}  (old {old['copy'] / old['receive']:.2f})")
    print(f"RATIO wal_per_move new/old = {new['wal_per_item_per_move'] / old['wal_per_item_per_move']:.2f}  "
          f"({new['wal_per_item_per_move']:,.0f} B vs {old['wal_per_item_per_move']:,.0f} B per item; goal <= 400 B)")
    print(f"RATIO wal_receive new/old = {new['receive_wal_per_item'] / old['receive_wal_per_item']:.2f}  "
          f"({new['receive_wal_per_item']:,.0f} B vs {old['receive_wal_per_item']:,.0f} B per item; goal <= 1,300 B)")


def bench_status(dsn: str, rows: int) -> None:
    ledger = Ledger(dsn)
    ledger.upgrade()
    ledger.declare(FLOW, actor="bench")
    print(f"\nfilling the ledger with {rows:,} items (set-based INSERT ... SELECT) ...", flush=True)
    started = time.perf_counter()
    with ledger.connect() as conn:
        conn.execute("SET synchronous_commit = off")
        step = 1_000_000
        for start in range(0, rows, step):
            conn.execute(
                """
                INSERT INTO conveyor.items (item_id, workflow, business_key, run_id, status, payload, input_hash)
                SELECT 'supplier_exceptions:EX-' || lpad(n::text, 9, '0'), 'supplier_exceptions',
                       'EX-' || lpad(n::text, 9, '0'), 'run-' || (n / 500), 'published',
                       jsonb_build_object('n', n, 'notes', 'late delivery'), md5(n::text)
                FROM generate_series(%s, %s) AS n
                """,
                (start, min(start + step, rows) - 1),
            )
            conn.commit()
        conn.execute("ANALYZE conveyor.item_states, conveyor.item_bodies")
    print(f"filled in {time.perf_counter() - started:.0f} s")
    # A new run's items on top of them, moved while the statistics still say none is 'received'.
    fresh = [NewItem(f"NEW-{n:06d}", payload(n)) for n in range(10_000)]
    ledger.receive(WF, "today", fresh, actor="bench")
    started = time.perf_counter()
    moved = ledger.transition(
        WF, [f"{WF}:{i.business_key}" for i in fresh], to_status="validated", from_status="received", actor="bench"
    )
    seconds = time.perf_counter() - started
    assert len(moved.moved) == len(fresh)
    print(f"moving a new run's {len(fresh):,} items with {rows:,} in the ledger: {seconds:.2f} s "
          f"({len(fresh) / seconds:,.0f} items/s)")
    conveyor = str(Path(sys.executable).with_name("conveyor"))
    probe = f"supplier_exceptions:EX-{rows // 2:09d}"
    env = dict(os.environ, CONVEYOR_LEDGER_DSN=dsn)
    seconds = []
    for _ in range(7):
        started = time.perf_counter()
        done = subprocess.run([conveyor, "status", probe], env=env, capture_output=True, text=True)
        seconds.append(time.perf_counter() - started)
        assert done.returncode == 0, done.stderr
    python_only = []
    for _ in range(5):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        python_only.append(time.perf_counter() - started)
    median = statistics.median(seconds)
    print(f"`conveyor status` with {rows:,} items: median {median:.3f} s, max {max(seconds):.3f} s "
          f"(bare interpreter start {statistics.median(python_only):.3f} s)")
    print(f"RATIO status/goal = {median / 0.5:.2f}  (goal <= 1.0, i.e. <= 0.5 s)")
    # The newest items of a workflow, no run given: every one of the N million items is the
    # workflow's (a harder case than the goal's 2M).
    seconds = []
    for _ in range(5):
        started = time.perf_counter()
        done = subprocess.run([conveyor, "items", "--workflow", WF], env=env, capture_output=True, text=True)
        seconds.append(time.perf_counter() - started)
        assert done.returncode == 0, done.stderr
    median = statistics.median(seconds)
    print(f"`conveyor items --workflow {WF}` (no run) with {rows:,} items: median {median:.3f} s, "
          f"max {max(seconds):.3f} s")
    print(f"RATIO items_workflow/goal = {median / 0.3:.2f}  (goal <= 1.0, i.e. <= 0.3 s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--status-rows", type=int, default=10_000_000)
    parser.add_argument("--old", default=PREVIOUS_RELEASE, help="the commit measured beside this tree")
    parser.add_argument("--measure", metavar="DSN", help=argparse.SUPPRESS)  # one side, in a child process
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure_transitions(args.measure, args.items)))
        return
    name = f"conveyor_bench_{os.getpid()}"
    if args.items:
        bench_transitions(args.items, args.old, name)
    if args.status_rows:  # a database of another name: declarations are cached per DSN
        try:
            dsn = scratch_database(f"{name}_status")
            bench_status(dsn, args.status_rows)
        finally:
            drop(f"{name}_status")


if __name__ == "__main__":
    main()
