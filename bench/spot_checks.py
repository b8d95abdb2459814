"""The cost of spot checks: the AI step with ``spot_check`` on vs off, items/s side by side.

The same step (classify_exception, the embedded model: the fastest model, so the guardrail's own
cost shows most) over N ledger items per run, alternately with ``spot_check=0`` and with
``spot_check=0.02`` (each run on fresh items of its own run id), ``--rounds`` times each; the
median items/s of each side and their RATIO (goal: on/off >= 0.95, within 5%). What spot checks
add per item: the seeded draw (two sha256 per passing answer), the spot checks' audit detail,
and one tally row per committed chunk.

Run: ``.venv/bin/python bench/spot_checks.py [--items 50000] [--rounds 3] [--share 0.02]``
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "dags"))
os.environ.setdefault("AIRFLOW__CONVEYOR__INCLUDE_FOLDER", str(REPO / "include"))

from bench.ai_step import seed  # noqa: E402
from tests.support import postgres  # noqa: E402


def one_run(ledger, run_id: str, items: int, share: float, batch_size: int) -> dict:
    from conveyor.ai.runner import StepConfig, run_step
    from conveyor_examples.supplier_exceptions import CLASSIFY_EXCEPTION

    seed(ledger, run_id, items)
    with ledger.connect() as conn:  # fresh statistics for every run alike (autovacuum is off here)
        conn.execute("ANALYZE conveyor.item_states, conveyor.item_bodies")
    started, cpu = time.perf_counter(), time.process_time()
    summary = run_step(
        ledger,
        StepConfig.of(workflow="supplier_exceptions", run_id=run_id, task=CLASSIFY_EXCEPTION, actor="bench",
                   batch_size=batch_size, spot_check=share, max_error_rate=0.05 if share else None),
    )  # fmt: skip
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    return {"rate": summary["items"] / seconds, "seconds": seconds, "cpu_rate": summary["items"] / cpu, **summary}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--share", type=float, default=0.02)
    parser.add_argument("--batch", type=int, default=5000)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("CONVEYOR_HOME", str(REPO / ".conveyor"))
    from conveyor.ledger import Ledger
    from conveyor_examples.supplier_exceptions import SUPPLIER_EXCEPTIONS, exception_model

    name = f"h_accuracy_bench_spot_{os.getpid()}"
    ledger = Ledger(postgres.create_database(name))
    try:
        ledger.upgrade()
        ledger.declare(SUPPLIER_EXCEPTIONS, actor="bench")
        exception_model()  # trained (or loaded) before any clock starts
        one_run(ledger, "warmup", 2000, args.share, args.batch)
        rates: dict[str, list[float]] = {"off": [], "on": []}
        cpu_rates: dict[str, list[float]] = {"off": [], "on": []}
        for n in range(args.rounds):
            for side, share in (("off", 0.0), ("on", args.share)) if n % 2 == 0 else (("on", args.share), ("off", 0.0)):
                result = one_run(ledger, f"{side}-{n}", args.items, share, args.batch)
                rates[side].append(result["rate"])
                cpu_rates[side].append(result["cpu_rate"])
                print(f"round {n + 1} spot checks {side:<3}: {result['items']:,} items in {result['seconds']:.2f} s = "
                      f"{result['rate']:,.0f} items/s, {result['cpu_rate']:,.0f}/CPU s "
                      f"({result['passed']:,} passed, {result['review']:,} exceptions, "
                      f"{result['spot_checked']:,} spot checks)")  # fmt: skip
        off, on = statistics.median(rates["off"]), statistics.median(rates["on"])
        print(f"median items/s: spot checks off {off:,.0f}, on ({args.share:g}) {on:,.0f}")
        print(f"RATIO spot_checks_on/off = {on / off:.3f}  (goal >= 0.95)")
        # The machine is shared: wall time moves with the neighbours' load; this process's own CPU
        # time per item (the model, the draw, building the writes) does not.
        cpu_off, cpu_on = statistics.median(cpu_rates["off"]), statistics.median(cpu_rates["on"])
        print(f"median items per CPU second of the step's process: off {cpu_off:,.0f}, on {cpu_on:,.0f}")
        print(f"RATIO spot_checks_on/off (process CPU) = {cpu_on / cpu_off:.3f}")
    finally:
        postgres.drop_database(name)


if __name__ == "__main__":
    main()
