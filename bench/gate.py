"""The validation gate on a 1M-row extract vs the same checks written by hand in pandas, in one run.

Three measurements, each in a fresh child process (so each peak memory is its own), on the same
generated file (1M rows of the supplier extract, ~0.2% of them bad: negative amounts, formula
cells, dates in another format):

1. ``pandas``: the supplier suite's checks and the gate's guards written by hand (chunked
   ``read_csv``, vectorised masks, cross-chunk duplicate keys, failing rows with their values);
2. ``gate``: the gate's validation pass (readers, typed columns, the GX suite via a
   ``ValidationDefinition`` per chunk, findings per row) and its batch checks;
3. ``gate+ledger``: the whole gate, also writing the 1M items and their routing into a scratch
   ledger database (set-based, chunked).

Both 1 and 2 must find the same failing rows. Prints seconds, peak RSS and the ratio gate/pandas
(goal <= 2, peak <= 2 GB). Import time (Great Expectations takes seconds) is reported apart.

Run: ``.venv/bin/python bench/gate.py [--rows 1000000] [--chunk-size 250000] [--no-ledger]``
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from conveyor import Workflow
from conveyor.gate.readers import DEFAULT_CHUNK_SIZE

REPO = Path(__file__).resolve().parents[1]

AS_OF = datetime(2026, 11, 30, 6, tzinfo=UTC)
CACHE = Path(tempfile.gettempdir()) / "conveyor-bench-gate"
#: the supplier workflow as the tests declare it (the ledger knows a workflow by its declaration)
FLOW = Workflow(name="supplier_exceptions", source_field="supplier_id")


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# -- the input ------------------------------------------------------------------------------------


def make_extract(rows: int) -> tuple[Path, int]:
    """A good extract of ``rows`` rows with a few bad ones mixed in (cached between runs)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"extract_{rows}.csv"
    if path.exists():
        return path, _count_bad(rows)
    spec = importlib.util.spec_from_file_location(
        "conveyor_sample_data", REPO / "include" / "data" / "generate.py"
    )
    assert spec and spec.loader
    generator = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = generator
    spec.loader.exec_module(generator)
    good = CACHE / f"good_{rows}.csv"
    generator.write_supplier_rows(good, rows)
    with good.open(encoding="utf-8", newline="") as src, path.open("w", encoding="utf-8", newline="") as dst:
        reader = csv.DictReader(src)
        writer = csv.DictWriter(dst, fieldnames=reader.fieldnames or [], lineterminator="\n")
        writer.writeheader()
        for n, row in enumerate(reader, start=1):
            if n % 997 == 0:
                row["amount"] = "-5.00"
            elif n % 1511 == 0:
                row["notes"] = '=HYPERLINK("http://evil.example/","photos")'
            elif n % 2003 == 0:
                row["exception_date"] = "2026/11/01"
            writer.writerow(row)
    good.unlink()
    return path, _count_bad(rows)


def _count_bad(rows: int) -> int:
    return sum(1 for n in range(1, rows + 1) if n % 997 == 0 or n % 1511 == 0 or n % 2003 == 0)


# -- 1. by hand -----------------------------------------------------------------------------------

TEXT = ["exception_id", "supplier_id", "supplier_name", "po_number", "currency", "notes"]
REQUIRED = [
    "exception_id", "supplier_id", "supplier_name", "po_number", "exception_date", "amount", "currency",
    "quantity_ordered", "quantity_received", "notes",
]  # fmt: skip
# The same patterns as the gate (RE2-compatible, so pandas evaluates them in pyarrow).
NUMBER = r" *[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)? *"
FORMULA = r"^(?:[=@\t\r]|[+-] *[0-9.,]*[^ 0-9.,]|[+-] *[0-9.,]+ +[^ ]|[+-] *$)"


def by_hand(path: Path, chunk_size: int) -> dict:
    """The supplier suite and the gate's guards, hand-written: failing rows -> [(check, value)]."""
    import pandas as pd

    as_of = pd.Timestamp(AS_OF.date())
    oldest = as_of - pd.Timedelta(days=365)
    failures: dict[int, list[tuple[str, object]]] = {}
    first_row: dict[str, int] = {}
    repeats: dict[str, list[int]] = {}
    rows = 0
    newest = None

    def flag(mask: pd.Series, check: str, values: pd.Series) -> None:
        for row, value in values[mask].items():
            failures.setdefault(int(row), []).append((check, value))

    reader = pd.read_csv(
        path, dtype=str, keep_default_na=False, na_values=[""], encoding="utf-8-sig", chunksize=chunk_size
    )
    start = 1
    with reader:
        for raw in reader:
            raw.index = pd.RangeIndex(start, start + len(raw))
            start += len(raw)
            rows += len(raw)
            missing = [c for c in REQUIRED if c not in raw.columns]
            if missing:
                raise SystemExit(f"missing columns {missing}")
            for column in REQUIRED:
                flag(raw[column].isna(), f"not_null({column})", raw[column])
            for column, regex in (
                ("exception_id", r"^EX-\d{4}-\d{6}$"),
                ("supplier_id", r"^SUP-\d{4}$"),
                ("po_number", r"^PO-\d{6}$"),
            ):
                present = raw[column].notna()
                flag(present & ~raw[column].str.contains(regex, regex=True).fillna(True), f"regex({column})",
                     raw[column])  # fmt: skip
            dates = pd.to_datetime(raw["exception_date"], format="%Y-%m-%d", errors="coerce")
            flag(raw["exception_date"].notna() & dates.isna(), "parse(exception_date)", raw["exception_date"])
            flag(dates.notna() & ((dates < oldest) | (dates > as_of)), "between(exception_date)", dates)
            if dates.notna().any():
                top = dates.max()
                newest = top if newest is None or top > newest else newest
            for column, integer in (
                ("amount", False),
                ("quantity_ordered", True),
                ("quantity_received", True),
            ):
                text = raw[column]
                looks = text.str.fullmatch(NUMBER).fillna(False).astype(bool)
                number = pd.to_numeric(text.where(looks), errors="coerce")
                bad = text.notna() & number.isna()
                if integer:
                    bad |= number.notna() & (number % 1 != 0)
                flag(bad, f"parse({column})", text)
                if column == "amount":
                    flag(number.notna() & ~((number > 0) & (number <= 1_000_000)), "between(amount)", number)
                else:
                    flag(number.notna() & (number < 0), f"between({column})", number)
            currency = raw["currency"]
            flag(
                currency.notna() & ~currency.isin(["EUR", "USD", "GBP", "CHF"]), "in_set(currency)", currency
            )
            lengths = raw["notes"].str.len()
            flag(lengths.notna() & ((lengths < 3) | (lengths > 2000)), "lengths(notes)", raw["notes"])
            for column in TEXT:
                text = raw[column]
                flag(
                    text.notna() & text.str.contains(FORMULA, regex=True).fillna(False),
                    f"formula({column})",
                    text,
                )
                if column != "notes":
                    flag(text.str.len().fillna(0) > 100_000, f"cell_size({column})", text)
            for row, key in zip(raw.index, raw["exception_id"].tolist(), strict=True):
                if key is None or key != key:
                    continue
                seen = first_row.get(key)
                if seen is None:
                    first_row[key] = int(row)
                else:
                    repeats.setdefault(key, [seen]).append(int(row))
    for key, rows_of_key in repeats.items():
        for row in rows_of_key:
            failures.setdefault(row, []).append(("unique(exception_id)", key))
    rate = len(failures) / rows
    fresh = newest is not None and (as_of - newest) <= pd.Timedelta(days=7)
    return {"rows": rows, "failing_rows": sorted(failures), "exception_rate": rate, "fresh": bool(fresh)}


# -- 2. and 3. the gate ---------------------------------------------------------------------------


def gate_config(path: Path, chunk_size: int, run_id: str):
    from conveyor.gate.runner import GateConfig

    return GateConfig(
        workflow="supplier_exceptions",
        run_id=run_id,
        step="gate",
        suite="supplier_exceptions",
        source=str(path),
        as_of=AS_OF,
        max_age=timedelta(days=7),
        chunk_size=chunk_size,
        max_exception_rate=0.05,
    )


def gate_validate(path: Path, chunk_size: int) -> dict:
    """The gate's validation pass and batch checks (what decides every row), no ledger writes."""
    from conveyor.gate.runner import FileGate
    from conveyor.gate.sources import reader_for

    class NoLedger:  # the validation pass reads only the workflow's declaration
        @staticmethod
        def workflow(name: str) -> Workflow:
            return FLOW

    runner = FileGate(gate_config(path, chunk_size, "bench"), ledger=NoLedger(), actor="bench")  # type: ignore[arg-type]
    reader = reader_for(str(path), chunk_size=chunk_size)
    reader.preflight()
    plan = runner.validation.validate(reader)  # validating a batch needs no ledger (batch_validation.py)
    runner.validation.check_batch(plan, reader)
    return {
        "rows": plan.rows,
        "failing_rows": sorted(plan.findings),
        "exception_rate": len(plan.findings) / plan.rows,
    }


def gate_full(path: Path, chunk_size: int, dsn: str) -> dict:
    """The whole gate: validation, 1M items received and routed in the ledger, findings stored."""
    from conveyor.gate.runner import open_gate
    from conveyor.ledger import Ledger

    ledger = Ledger(dsn)
    summary = open_gate(gate_config(path, chunk_size, "bench-full"), ledger, actor="bench").run()
    counts = ledger.count_by_status(workflow="supplier_exceptions", run_id="bench-full")
    return {"rows": summary.rows, "validated": summary.validated, "quarantined": summary.quarantined,
            "ledger": counts}  # fmt: skip


def child(phase: str, path: Path, chunk_size: int, dsn: str | None) -> None:
    started = time.perf_counter()
    if phase != "pandas":
        import great_expectations  # noqa: F401  (import cost reported apart)
    import pandas  # noqa: F401

    imported = time.perf_counter()
    if phase == "pandas":
        result = by_hand(path, chunk_size)
    elif phase == "gate":
        result = gate_validate(path, chunk_size)
    else:
        assert dsn
        result = gate_full(path, chunk_size, dsn)
    done = time.perf_counter()
    result.update(seconds=done - imported, import_seconds=imported - started, peak_mb=peak_mb())
    print("RESULT " + json.dumps(result))


def run_child(phase: str, path: Path, chunk_size: int, dsn: str | None = None) -> dict:
    command = [
        sys.executable,
        __file__,
        "--phase",
        phase,
        "--file",
        str(path),
        "--chunk-size",
        str(chunk_size),
    ]
    if dsn:
        command += ["--dsn", dsn]
    out = subprocess.run(
        command,
        capture_output=True,
        text=True,
        env=dict(os.environ, GX_ANALYTICS_ENABLED="False", AIRFLOW__CONVEYOR__INCLUDE_FOLDER=str(REPO / "include")),
    )
    lines = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
    if out.returncode != 0 or not lines:
        raise SystemExit(f"{phase} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT ") :])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--chunk-size", type=int, default=DEFAULT_CHUNK_SIZE)
    parser.add_argument("--no-ledger", action="store_true", help="skip the end-to-end run with ledger writes")
    parser.add_argument("--phase", choices=["pandas", "gate", "gate+ledger"], help=argparse.SUPPRESS)
    parser.add_argument("--file", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--dsn", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        child(args.phase, args.file, args.chunk_size, args.dsn)
        return

    t0 = time.perf_counter()
    path, planted = make_extract(args.rows)
    size_mb = path.stat().st_size / 1e6
    print(f"input: {path} ({args.rows:,} rows, {size_mb:.0f} MB, {planted} bad rows planted); "
          f"prepared in {time.perf_counter() - t0:.1f}s; chunk size {args.chunk_size:,}")  # fmt: skip
    hand = run_child("pandas", path, args.chunk_size)
    gate = run_child("gate", path, args.chunk_size)
    assert hand["rows"] == gate["rows"] == args.rows, (hand["rows"], gate["rows"])
    same = hand["failing_rows"] == gate["failing_rows"]
    print(f"pandas by hand : {hand['seconds']:7.2f} s   peak {hand['peak_mb']:6.0f} MB   "
          f"failing rows {len(hand['failing_rows'])}")  # fmt: skip
    print(f"gate (GX)      : {gate['seconds']:7.2f} s   peak {gate['peak_mb']:6.0f} MB   "
          f"failing rows {len(gate['failing_rows'])}   "
          f"(+{gate['import_seconds']:.1f} s importing GX)")  # fmt: skip
    print(f"same failing rows: {same}")
    ratio = gate["seconds"] / hand["seconds"]
    print(
        f"RATIO gate/pandas = {ratio:.2f} (goal <= 2)   "
        f"gate peak memory: {gate['peak_mb']:.0f} MB (goal <= 2048)"
    )
    if not args.no_ledger:
        sys.path.insert(0, str(REPO / "bench"))
        from _pg import drop, scratch_database

        from conveyor.ledger import Ledger

        name = f"conveyor_bench_gate_{os.getpid()}"
        dsn = scratch_database(name)
        try:
            Ledger(dsn).upgrade()
            Ledger(dsn).declare(FLOW, actor="bench")
            full = run_child("gate+ledger", path, args.chunk_size, dsn)
        finally:
            drop(name)
        print(f"gate + ledger  : {full['seconds']:7.2f} s   peak {full['peak_mb']:6.0f} MB   "
              f"validated {full['validated']:,} quarantined {full['quarantined']:,}   "
              f"ledger {full['ledger']}")  # fmt: skip
        routing = max(full["seconds"] - gate["seconds"], 1e-9)
        print(f"  of which routing in the ledger: {routing:.1f} s ({args.rows / routing:,.0f} items/s)")
        print(f"RATIO routing_items_per_s/100k = {args.rows / routing / 100_000:.2f}  (goal >= 1)")
        print(f"RATIO gate_with_ledger_s/20s = {full['seconds'] / 20:.2f}  (goal <= 1 at 1M rows)   "
              f"peak {full['peak_mb']:.0f} MB (goal <= 1024)")
    if not same:
        only_hand = sorted(set(hand["failing_rows"]) - set(gate["failing_rows"]))[:10]
        only_gate = sorted(set(gate["failing_rows"]) - set(hand["failing_rows"]))[:10]
        print(f"  rows only the hand checks flag: {only_hand}; only the gate: {only_gate}")
        sys.exit(1)


if __name__ == "__main__":
    main()
