"""AI step throughput, measured in one run.

1. LLM path: the AI step (classify_exception) over N ledger items against the tests'
   OpenAI-compatible server on 127.0.0.1 answering every request after 100 ms, at most 32 at a
   time; the step runs with ``max_concurrency=32``. The ceiling of one item per request is
   32 / 0.1 s = 320 items/s. The step runs twice: with ``--items-per-call`` items per request
   (default 8; the RATIO against 320/s, goal >= 0.9, with the requests' own share of the
   request ceiling) and with one item per request. Side measurements locate the gap to the
   ceiling: one item per request without log-probabilities (client CPU per item), the bare
   OpenAI SDK on the same server, and 1 s latency (ceiling 32/s), where the client's CPU is not
   the bound and the ratio shows the step's own batching and concurrency.
2. Embedded model: the same step with the default local model (calibrated classifier + drafter)
   over 100k ledger items, items/s for the whole step (ledger reads and writes included), and
   the model alone on the same 100k inputs for reference.

Run: ``.venv/bin/python bench/ai_step.py [--llm-items 1600] [--items-per-call 8] [--local-items 100000]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "dags"))  # the example workflow's own code, as a DAG bundle puts it there
os.environ.setdefault("AIRFLOW__CONVEYOR__INCLUDE_FOLDER", str(REPO / "include"))

from tests.ai.llm_server import LLMServer  # noqa: E402
from tests.support import postgres  # noqa: E402

LATENCY = 0.1
CONCURRENCY = 32
CEILING = CONCURRENCY / LATENCY
CONN_ID = "bench_llm"


def sample_rows() -> list[dict[str, str]]:
    import csv

    with (REPO / "include/data/supplier_exceptions/extract.csv").open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def seed(ledger, run_id: str, count: int) -> None:
    from conveyor.ledger import NewItem

    rows = sample_rows()
    items = []
    for n in range(count):
        row = dict(rows[n % len(rows)])
        row["exception_id"] = f"EX-B-{run_id}-{n:07d}"
        items.append(NewItem(row["exception_id"], row))
    ledger.receive("supplier_exceptions", run_id, items, actor="bench")
    ids = ledger.item_ids(workflow="supplier_exceptions", run_id=run_id, status="received")
    ledger.transition("supplier_exceptions", ids, to_status="validated", from_status="received", actor="bench")


def run_llm(ledger, server, run_id: str, count: int, batch_size: int, latency: float, **overrides) -> dict:
    """Seed ``count`` items, run the step against the server; return the measurements."""
    from conveyor.ai.runner import AIStepRunner, StepConfig
    from conveyor_examples.supplier_exceptions import CLASSIFY_EXCEPTION

    seed(ledger, run_id, count)
    server.configure(latency=latency, max_concurrency=CONCURRENCY, record_prompts=False)
    config = dict(model=CONN_ID, max_concurrency=CONCURRENCY, batch_size=batch_size, min_confidence=0.5)
    config.update(overrides)
    started = time.perf_counter()
    runner = AIStepRunner(
        ledger,
        StepConfig.of(workflow="supplier_exceptions", run_id=run_id, task=CLASSIFY_EXCEPTION, actor="bench", **config),
    )
    setup = time.perf_counter() - started  # connection lookup and model construction, once per task
    started = time.perf_counter()
    cpu = time.process_time()
    try:
        summary = asyncio.run(runner.run())
    finally:
        runner.close()
    seconds = time.perf_counter() - started
    cpu = time.process_time() - cpu
    stats = server.stats()
    return {
        "items": summary["items"],
        "seconds": seconds,
        "setup": setup,
        "rate": summary["items"] / seconds,
        "cpu_ms": cpu / summary["items"] * 1000,
        "calls": stats["calls"],
        "max_in_flight": stats["max_in_flight"],
        "summary": summary,
    }


def raw_sdk_rate(server, count: int, latency: float) -> float:
    """Baseline: the bare OpenAI SDK client (no pydantic-ai, no ledger) against the same server."""
    import openai

    from conveyor_examples.supplier_exceptions import CLASSIFY_EXCEPTION, ExceptionClassification

    server.configure(latency=latency, max_concurrency=CONCURRENCY, record_prompts=False)
    client = openai.AsyncOpenAI(base_url=server.base_url, api_key="sk-bench-key", max_retries=0)
    rows = sample_rows()
    fmt = {
        "type": "json_schema",
        "json_schema": {
            "name": "ExceptionClassification",
            "strict": True,
            "schema": ExceptionClassification.model_json_schema(),
        },
    }

    async def one(n: int, gate: asyncio.Semaphore) -> None:
        async with gate:
            await client.chat.completions.create(
                model="bench-model",
                response_format=fmt,
                logprobs=True,
                temperature=0.0,
                messages=[
                    {"role": "system", "content": CLASSIFY_EXCEPTION.prompt_text()},
                    {"role": "user", "content": CLASSIFY_EXCEPTION.user_message(rows[n % len(rows)])},
                ],
            )

    async def run() -> float:
        gate = asyncio.Semaphore(CONCURRENCY)
        await asyncio.gather(*(one(n, gate) for n in range(CONCURRENCY)))
        started = time.perf_counter()
        await asyncio.gather(*(one(n, gate) for n in range(count)))
        return count / (time.perf_counter() - started)

    return asyncio.run(run())


def bench_llm(ledger, count: int, batch_size: int, items_per_call: int) -> None:
    server = LLMServer()
    try:
        os.environ[f"AIRFLOW_CONN_{CONN_ID.upper()}"] = json.dumps(
            {
                "conn_type": "pydanticai",
                "host": server.base_url,
                "password": "sk-bench-key",
                "extra": {"model": "openai-chat:bench-model"},
            }
        )
        run_llm(ledger, server, "warmup", 64, batch_size, LATENCY)  # imports, pools: not measured
        run_llm(ledger, server, "warmup-b", 64, batch_size, LATENCY, items_per_call=items_per_call)
        batched = run_llm(ledger, server, "llm-batched", count, batch_size, LATENCY, items_per_call=items_per_call)
        main = run_llm(ledger, server, "llm", count, batch_size, LATENCY)
        bare = run_llm(
            ledger,
            server,
            "llm-nolp",
            count // 2,
            batch_size,
            LATENCY,
            confidence_method="none",
            min_confidence=0.0,
        )
        slow = run_llm(ledger, server, "llm-slow", 10 * CONCURRENCY, batch_size, 1.0)
        raw = raw_sdk_rate(server, count // 2, LATENCY)
    finally:
        server.stop()
    print(f"ceiling: {CONCURRENCY} concurrent requests x 1/{LATENCY:.1f} s = {CEILING:.0f} requests/s")
    b = batched["summary"]
    print(
        f"LLM step, {items_per_call} items per request: {batched['items']:,} items in {batched['seconds']:.2f} s = "
        f"{batched['rate']:,.1f} items/s ({batched['calls']:,} requests = {batched['calls'] / batched['seconds']:,.1f}"
        f" requests/s, max {batched['max_in_flight']} in flight; {b['passed']} passed, {b['review']} to review; "
        f"CPU {batched['cpu_ms']:.2f} ms/item)"
    )
    print(
        f"RATIO llm_step_items/ceiling = {batched['rate'] / CEILING:.2f}  (goal >= 0.9; "
        f"requests/ceiling = {batched['calls'] / batched['seconds'] / CEILING:.2f})"
    )
    s = main["summary"]
    print(
        f"LLM step, 1 item per request: {main['items']:,} items in {main['seconds']:.2f} s = "
        f"{main['rate']:,.1f} items/s ({main['calls']:,} requests, max {main['max_in_flight']} in flight "
        f"at the server; {s['passed']} passed, {s['review']} to review; step process CPU "
        f"{main['cpu_ms']:.2f} ms/item; plus {main['setup']:.2f} s once for the connection and model set-up)"
    )
    print(f"RATIO llm_step_single/ceiling = {main['rate'] / CEILING:.2f}")
    print(
        f"  same without log-probabilities: {bare['rate']:,.1f} items/s, CPU {bare['cpu_ms']:.2f} ms/item "
        f"(so logprobs cost {main['cpu_ms'] - bare['cpu_ms']:.2f} ms/item of client CPU)"
    )
    print(
        f"  baseline, the bare OpenAI SDK client on the same server (no pydantic-ai, no ledger): "
        f"{raw:,.1f} items/s, RATIO {raw / CEILING:.2f}"
    )
    print(
        f"  at 1 s latency (ceiling {CONCURRENCY / 1.0:.0f}/s, not CPU-bound): {slow['rate']:,.1f} items/s, "
        f"RATIO {slow['rate'] / CONCURRENCY:.2f} ({slow['items']} items in {slow['seconds']:.2f} s)"
    )


def bench_local(ledger, count: int, batch_size: int) -> None:
    from conveyor.ai.models.base import ModelInput
    from conveyor.ai.runner import StepConfig, run_step
    from conveyor_examples.supplier_exceptions import CLASSIFY_EXCEPTION, exception_model

    started = time.perf_counter()
    seed(ledger, "local", count)
    print(f"(seeding {count:,} validated items took {time.perf_counter() - started:.1f} s; not measured)")
    model = exception_model()  # trained (or loaded from $CONVEYOR_HOME) before the clock starts
    started = time.perf_counter()
    summary = run_step(
        ledger,
        StepConfig.of(
            workflow="supplier_exceptions",
            run_id="local",
            task=CLASSIFY_EXCEPTION,
            actor="bench",
            batch_size=batch_size,
        ),
    )
    seconds = time.perf_counter() - started
    step_rate = summary["items"] / seconds
    print(
        f"embedded model, whole step: {summary['items']:,} items in {seconds:.2f} s = "
        f"{step_rate:,.0f} items/s "
        f"({summary['passed']:,} passed, {summary['review']:,} to review)"
    )
    rows = sample_rows()
    inputs = [ModelInput(f"i{n}", rows[n % len(rows)], "") for n in range(count)]
    started = time.perf_counter()
    asyncio.run(model.predict_many(inputs))
    seconds = time.perf_counter() - started
    print(
        f"embedded model alone (classifier + drafter): {count:,} items in {seconds:.2f} s = "
        f"{count / seconds:,.0f} items/s"
    )
    print(f"RATIO ai_step/model_alone = {step_rate / (count / seconds):.2f}  (goal >= 0.45; and >= 30k items/s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llm-items", type=int, default=1600)
    parser.add_argument("--llm-batch", type=int, default=640)
    parser.add_argument("--items-per-call", type=int, default=8)
    parser.add_argument("--local-items", type=int, default=100_000)
    parser.add_argument("--local-batch", type=int, default=5000)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("CONVEYOR_HOME", str(REPO / ".conveyor"))
    from conveyor.ledger import Ledger

    name = f"conveyor_bench_ai_{os.getpid()}"
    ledger = Ledger(postgres.create_database(name))
    try:
        ledger.upgrade()
        from conveyor_examples.supplier_exceptions import SUPPLIER_EXCEPTIONS

        ledger.declare(SUPPLIER_EXCEPTIONS, actor="bench")
        if args.llm_items:
            bench_llm(ledger, args.llm_items, args.llm_batch, args.items_per_call)
        if args.local_items:
            bench_local(ledger, args.local_items, args.local_batch)
    finally:
        postgres.drop_database(name)


if __name__ == "__main__":
    main()
