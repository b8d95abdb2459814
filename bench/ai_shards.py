"""A sharded AI step: one worker against two, each an OS process of its own running one shard.

Process-level, not the Celery stack: each "worker" is a forked process that runs
``AIStepOperator(shard=n).execute()`` as an Airflow worker runs a mapped task instance (the
operator, the ledger's claims and leases, the LLM client: nothing stubbed). The model is the tests'
OpenAI-compatible server on 127.0.0.1 answering every request after ``--latency`` seconds (150 ms);
each worker sends at most ``--concurrency`` requests at once (4), so one worker is latency-bound
(ceiling concurrency / latency items/s) and a second worker should double the rate on 2 cores.

1. ``one``: N items of one run, one shard process.
2. ``two``: N other items of another run, two shard processes started together.

The rate is items / (the last shard's end - the first shard's start), timed around ``execute()``
in the worker processes (the fork itself and the parent's imports, the OpenAI client's included,
are not counted; the task's own setup, connection lookup and model construction, is). Both phases
check that the model-call count equals the items and that no item was asked twice (the server's
prompt log).

Run: ``.venv/bin/python bench/ai_shards.py [--items 1200] [--latency 0.15] [--concurrency 4]``
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing as mp
import os
import re
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "dags"))  # the example workflow's own code, as a DAG bundle puts it there
os.environ.setdefault("AIRFLOW__CONVEYOR__INCLUDE_FOLDER", str(REPO / "include"))

from tests.ai.llm_server import LLMServer  # noqa: E402
from tests.support import postgres  # noqa: E402

CONN_ID = "bench_llm"
FORK = mp.get_context("fork")


def seed(ledger: Any, run_id: str, count: int) -> list[str]:
    import csv

    from conveyor.ledger import NewItem

    with (REPO / "include/data/supplier_exceptions/extract.csv").open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    items = []
    for n in range(count):
        row = dict(rows[n % len(rows)])
        row["exception_id"] = f"EX-{run_id}-{n:06d}"
        items.append(NewItem(row["exception_id"], row))
    ledger.receive("supplier_exceptions", run_id, items, actor="bench")
    ids = ledger.item_ids(workflow="supplier_exceptions", run_id=run_id, status="received")
    ledger.transition("supplier_exceptions", ids, to_status="validated", from_status="received", actor="bench")
    return [i.business_key for i in items]


def _shard(queue: Any, run_id: str, shard: int, params: dict[str, Any]) -> None:
    from types import SimpleNamespace

    from conveyor.ai.operators import AIStepOperator
    from conveyor_examples.supplier_exceptions import CLASSIFY_EXCEPTION

    try:
        operator = AIStepOperator(
            task_id="classify", workflow="supplier_exceptions", ai_task=CLASSIFY_EXCEPTION, run_id=run_id,
            shard=shard, **params,
        )
        ti = SimpleNamespace(dag_id="bench_shards", task_id="classify", try_number=1, map_index=shard)
        started, cpu = time.time(), time.process_time()
        summary = operator.execute({"ti": ti, "run_id": run_id})  # type: ignore[arg-type]
        summary["cpu"] = time.process_time() - cpu
        queue.put(("success", started, time.time(), summary))
    except BaseException as exc:
        queue.put(("failed", 0.0, 0.0, f"{type(exc).__name__}: {exc}"))
    finally:
        queue.close()
        queue.join_thread()


def phase(ledger: Any, server: LLMServer, run_id: str, workers: int, count: int, args: argparse.Namespace) -> dict:
    keys = seed(ledger, run_id, count)
    server.configure(latency=args.latency, record_prompts=True)
    params = dict(
        model=CONN_ID, batch_size=args.batch, max_concurrency=args.concurrency, min_confidence=0.5,
        call_timeout=30.0, lease_seconds=60,
    )
    queues = [FORK.Queue() for _ in range(workers)]
    procs = [FORK.Process(target=_shard, args=(q, run_id, n, params)) for n, q in enumerate(queues)]
    server_cpu = _cpu(server.process.pid)
    wall = time.time()
    for p in procs:
        p.start()
    results = [q.get(timeout=900) for q in queues]
    for p in procs:
        p.join(timeout=60)
    wall = time.time() - wall
    failed = [r for r in results if r[0] != "success"]
    if failed:
        raise SystemExit(f"{run_id}: a shard failed: {failed}")
    start, end = min(r[1] for r in results), max(r[2] for r in results)
    summaries = [r[3] for r in results]
    stats = server.stats()
    server_cpu = _cpu(server.process.pid) - server_cpu
    wanted = set(keys)
    # Each prompt's items, each counted once per prompt (an item's id may appear twice in its text).
    asked: Counter[str] = Counter(
        key for prompt in stats["prompts"] for key in set(re.findall(rf"EX-{run_id}-\d{{6}}", prompt)) if key in wanted
    )
    moved_twice = 0
    with ledger.connect() as conn:
        (moved_twice,) = conn.execute(
            "SELECT count(*) FROM (SELECT item_id FROM conveyor.transitions WHERE run_id = %s"
            " AND from_status = 'validated' GROUP BY item_id HAVING count(*) > 1) t",
            (run_id,),
        ).fetchone()
        (waiting,) = conn.execute(
            "SELECT count(*) FROM conveyor.items WHERE run_id = %s AND status = 'validated'", (run_id,)
        ).fetchone()
    items = sum(s["items"] for s in summaries)
    return {
        "workers": workers,
        "items": items,
        "per_shard": [s["items"] for s in summaries],
        "seconds": end - start,
        "wall": wall,
        "rate": items / (end - start),
        "calls": stats["calls"],
        "asked_twice": sum(1 for n in asked.values() if n > 1),
        "never_asked": len(wanted - set(asked)),
        "moved_twice": moved_twice,
        "left_waiting": waiting,
        "max_in_flight": stats["max_in_flight"],
        "worker_cpu_ms": sum(s["cpu"] for s in summaries) / items * 1000,
        "server_cpu_ms": server_cpu / items * 1000,
        "step_seconds": [s["seconds"] for s in summaries],
    }


def _cpu(pid: int) -> float:
    import psutil

    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def report(r: dict) -> None:
    print(
        f"{r['workers']} worker(s): {r['items']} items {r['per_shard']} in {r['seconds']:.2f} s"
        f" ({r['wall']:.2f} s with the forks) = {r['rate']:.1f} items/s; model calls {r['calls']}"
        f" (items {r['items']}), asked twice {r['asked_twice']}, never asked {r['never_asked']},"
        f" moved twice {r['moved_twice']}, left waiting {r['left_waiting']},"
        f" max in flight {r['max_in_flight']}; CPU per item: workers {r['worker_cpu_ms']:.1f} ms,"
        f" server {r['server_cpu_ms']:.1f} ms; runner seconds per shard {r['step_seconds']}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=1200)
    parser.add_argument("--latency", type=float, default=0.15)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--batch", type=int, default=20)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("CONVEYOR_HOME", str(REPO / ".conveyor"))
    for name in ("httpx", "openai", "conveyor", "airflow"):
        logging.getLogger(name).setLevel(logging.WARNING)
    from conveyor.ledger import Ledger
    from tests.ai.workers import preload

    name = f"conveyor_bench_shards_{os.getpid()}"
    dsn = postgres.create_database(name)
    server = LLMServer()
    try:
        os.environ["AIRFLOW_CONN_CONVEYOR_LEDGER"] = dsn
        os.environ[f"AIRFLOW_CONN_{CONN_ID.upper()}"] = json.dumps(
            {"conn_type": "pydanticai", "host": server.base_url, "password": "sk-bench",
             "extra": {"model": "openai-chat:fake-model"}}
        )
        ledger = Ledger(dsn)
        ledger.upgrade()
        from conveyor_examples.supplier_exceptions import SUPPLIER_EXCEPTIONS

        ledger.declare(SUPPLIER_EXCEPTIONS, actor="bench")
        preload()
        # A warm worker: the OpenAI client's modules (2 s to import) are loaded before the fork, as
        # the task processes of a running worker would find them; the rest of the task's setup counts.
        import pydantic_ai.models.openai  # noqa: F401
        import pydantic_ai.providers.openai  # noqa: F401

        ceiling = args.concurrency / args.latency
        print(
            f"{args.items} items per phase, latency {args.latency * 1000:.0f} ms, max_concurrency {args.concurrency}"
            f" per worker (ceiling {ceiling:.1f} items/s per worker), chunks of {args.batch}",
            flush=True,
        )
        one = phase(ledger, server, "one", 1, args.items, args)
        report(one)
        two = phase(ledger, server, "two", 2, args.items, args)
        report(two)
        print(f"RATIO two_workers/one_worker = {two['rate'] / one['rate']:.2f} (goal >= 1.7)")
        print(f"RATIO one_worker/ceiling = {one['rate'] / ceiling:.2f}")
        for r in (one, two):
            ok = r["calls"] == r["items"] == args.items and not (r["asked_twice"] or r["moved_twice"])
            print(f"CHECK {r['workers']} worker(s): calls == items: {r['calls'] == r['items']},"
                  f" no item asked twice: {r['asked_twice'] == 0}, all done once: {ok and not r['left_waiting']}")
    finally:
        server.stop()
        postgres.drop_database(name)


if __name__ == "__main__":
    main()
