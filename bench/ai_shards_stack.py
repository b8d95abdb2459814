"""A sharded AI step on the real stack: one Celery worker's share against two.

The native deployment of tests/support/stack (scheduler, api-server, dag-processor, triggerer, two
Celery workers ``w1``/``w2`` with ONE task slot each, Redis, S3 on loopback) runs the DAGs of
``bench/shard_dags/``: N items into the ledger, then the AI step mapped over 1 shard
(``bench_ai_shards_1``: one worker works) or 2 shards (``bench_ai_shards_2``: with one slot per
worker, each worker runs one shard). The model is the tests' OpenAI-compatible server on 127.0.0.1
answering every request after ``--latency`` seconds; each shard sends at most 4 requests at once,
so one worker is latency-bound.

The rate is items / (the last shard's end - the first shard's start), from the task instances'
start and end dates (Celery hand-off and task start-up included, queueing before the start not).
Both runs check that the model-call count equals the items and that no item was asked twice.

Run: ``.venv/bin/python bench/ai_shards_stack.py [--items 2400] [--latency 0.15]``
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
import tempfile
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.ai.llm_server import LLMServer  # noqa: E402
from tests.support.stack import NativeStack, StackOptions  # noqa: E402

TASK = "classify"


def _when(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def measure(stack: NativeStack, server: LLMServer, shards: int, items: int, latency: float) -> dict[str, Any]:
    dag_id = f"bench_ai_shards_{shards}"
    server.configure(latency=latency, record_prompts=True)
    run_id = stack.trigger(dag_id, {"rows": items})
    stack.wait_for_run(dag_id, run_id, timeout=1800)
    tis = [ti for ti in stack.task_instances(dag_id, run_id) if ti["task_id"] == TASK]
    start = min(_when(ti["start_date"]) for ti in tis)
    end = max(_when(ti["end_date"]) for ti in tis)
    stats = server.stats()
    asked: Counter[str] = Counter(
        key for prompt in stats["prompts"] for key in set(re.findall(r"EX-[A-Za-z0-9]+-\d{6}", prompt))
    )
    return {
        "shards": shards,
        "items": items,
        "seconds": end - start,
        "rate": items / (end - start),
        "hosts": sorted(str(ti.get("hostname")) for ti in tis),
        "per_shard_seconds": [round(_when(ti["end_date"]) - _when(ti["start_date"]), 1) for ti in tis],
        "calls": stats["calls"],
        "asked": len(asked),
        "asked_twice": sum(1 for n in asked.values() if n > 1),
        "max_in_flight": stats["max_in_flight"],
    }


def report(r: dict[str, Any]) -> None:
    print(
        f"{r['shards']} shard(s) on {r['hosts']}: {r['items']} items in {r['seconds']:.1f} s = {r['rate']:.1f} items/s"
        f" (shards {r['per_shard_seconds']} s); model calls {r['calls']} (items {r['items']}, distinct asked"
        f" {r['asked']}), asked twice {r['asked_twice']}, max in flight {r['max_in_flight']}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=2400)
    parser.add_argument("--latency", type=float, default=0.15)
    args = parser.parse_args()
    server = LLMServer()
    llm = {"conn_type": "pydanticai", "host": server.base_url, "password": "sk-bench",
           "extra": {"model": "openai-chat:fake-model"}}
    options = dataclasses.replace(
        StackOptions(dag_folders=(REPO / "bench" / "shard_dags",)),
        worker_concurrency=1,
        env={
            "AIRFLOW_CONN_BENCH_LLM": json.dumps(llm),
            "PYTHONPATH": str(REPO / "dags"),  # the example workflow's code, as the dags/ bundle gives it
            "AIRFLOW__CONVEYOR__INCLUDE_FOLDER": str(REPO / "include"),
        },
    )
    try:
        root = tempfile.mkdtemp(prefix="bench-shards-stack-")  # kept: the components' logs
        print(f"stack in {root}", flush=True)
        with NativeStack(Path(root), options) as stack:
            print(f"stack healthy after {stack.startup_seconds}", flush=True)
            for dag_id in ("bench_ai_shards_1", "bench_ai_shards_2"):
                stack.wait_for_dag(dag_id)
                stack.unpause(dag_id)
            one = measure(stack, server, 1, args.items, args.latency)
            report(one)
            two = measure(stack, server, 2, args.items, args.latency)
            report(two)
            print(f"RATIO two_workers/one_worker = {two['rate'] / one['rate']:.2f} (goal >= 1.7)  [Celery stack]")
            for r in (one, two):
                print(f"CHECK {r['shards']} shard(s): calls == items: {r['calls'] == r['items']},"
                      f" no item asked twice: {r['asked_twice'] == 0}, every item asked: {r['asked'] == r['items']}")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
