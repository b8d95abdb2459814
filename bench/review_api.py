"""20 reviewers deciding 2,000 items at once through the review API: latency and ledger round trips.

A real ``airflow api-server`` with the Conveyor plugin, on a scratch metadata DB and a scratch
ledger reached through a TCP relay on 127.0.0.1 that counts the ledger's round trips (each turn
of the conversation from the API server to PostgreSQL and back) and its new connections. Each
reviewer opens an item (GET) and decides it (POST); every tenth item is opened and decided by a
second reviewer too, as when two people pick the same item, so a double decision would show.

Two phases side by side in one run, on fresh items each: the API server with
``[conveyor] ledger_pool_size = 0`` (every ledger use opens its own connection: the code before
the pool) and with the default pool (one idle connection per process), then with 4 (an API
server taking many reviewers at once may want more). Printed per phase: p50/p95 of a decision and of an open,
round trips and connections per decision, items decided twice; then RATIO lines new/old.

Run by hand: ``.venv/bin/python bench/review_api.py [--items 2000] [--reviewers 20]`` (about three
minutes on two cores: the API server starts twice).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote, urlsplit

from _pg import drop, scratch_database

from conveyor.ledger import Ledger
from conveyor.quickstart.api_server import ApiServerProcess, free_port
from tests.review.conftest import route_to_review
from tests.support import postgres
from tests.support.airflow_env import create_metadata_db
from tests.support.workflows import declare_all

WF = "supplier_exceptions"
BASE = "/conveyor/api/review"


class CountingRelay:
    """A TCP relay to PostgreSQL that counts connections and round trips (client turns)."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = free_port()
        self.connections = 0
        self.round_trips = 0
        self._ready = threading.Event()
        self._loop = asyncio.new_event_loop()
        threading.Thread(target=self._run, daemon=True).start()
        self._ready.wait(10)

    def counts(self) -> tuple[int, int]:
        return self.connections, self.round_trips

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", self.port))
        self._ready.set()
        self._loop.run_until_complete(server.serve_forever())

    async def _serve(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        self.connections += 1
        server_r, server_w = await asyncio.open_connection("127.0.0.1", self.target_port)
        turn = {"last": "server"}

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter, side: str) -> None:
            try:
                while data := await src.read(65536):
                    if side == "client" and turn["last"] == "server":
                        self.round_trips += 1  # the client speaks after the server answered: a new turn
                    turn["last"] = side
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, asyncio.CancelledError):
                pass
            finally:
                dst.close()

        await asyncio.gather(pipe(client_r, server_w, "client"), pipe(server_r, client_w, "server"))


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def phase(
    name: str, pool_size: int, args: argparse.Namespace, ledger: Ledger, relay: CountingRelay, work: Path
) -> dict[str, float]:
    run_id = f"bench-{name}"
    keys = [f"{name}-{k:05d}" for k in range(args.items)]
    route_to_review(ledger, WF, run_id, pending=keys)
    ids = [f"{WF}:{k}" for k in keys]
    users = {f"reviewer{n:02d}": ("user", f"pass-{n:02d}-x") for n in range(args.reviewers)}
    os.environ["AIRFLOW__CONVEYOR__LEDGER_POOL_SIZE"] = str(pool_size)
    process = ApiServerProcess(work / name, users)
    try:
        server = process.wait_ready(300)
        clients = [server.client(user) for user in users]
        # Work lists: reviewer n takes every n-th item; every tenth item also goes to the next reviewer.
        lists: list[list[str]] = [ids[n :: args.reviewers] for n in range(args.reviewers)]
        for n, own in enumerate(lists[:]):
            lists[(n + 1) % args.reviewers] += own[::10]
        opens: list[float] = []
        decides: list[float] = []
        answers: dict[int, int] = {}
        lock = threading.Lock()

        def reviewer(n: int) -> None:
            client = clients[n]
            for item_id in lists[n]:
                path = f"{BASE}/items/{quote(item_id, safe='')}"
                started = time.perf_counter()
                client.get(path).raise_for_status()
                opened = time.perf_counter()
                done = client.post(f"{path}/decision", json={"action": "approve"})
                decided = time.perf_counter()
                with lock:
                    opens.append(opened - started)
                    decides.append(decided - opened)
                    answers[done.status_code] = answers.get(done.status_code, 0) + 1

        conns0, trips0 = relay.counts()
        started = time.monotonic()
        with ThreadPoolExecutor(args.reviewers) as pool:
            list(pool.map(reviewer, range(args.reviewers)))
        wall = time.monotonic() - started
        conns1, trips1 = relay.counts()
        for client in clients:
            client.close()
    finally:
        process.stop()
    with ledger.connect() as conn:
        twice = conn.execute(
            "SELECT count(*) FROM (SELECT item_id FROM conveyor.transitions WHERE run_id = %s"
            " AND from_status = 'pending_review' GROUP BY item_id HAVING count(*) > 1) d",
            (run_id,),
        ).fetchone()
        left = ledger.count_by_status(workflow=WF, run_id=run_id).get("pending_review", 0)
    requests = len(opens)
    decided = answers.get(200, 0)
    result = {
        "decide_p50": percentile(decides, 0.5) * 1000,
        "decide_p95": percentile(decides, 0.95) * 1000,
        "open_p50": percentile(opens, 0.5) * 1000,
        "open_p95": percentile(opens, 0.95) * 1000,
        "trips_per_request": (trips1 - trips0) / (2 * requests),
        "connections_per_request": (conns1 - conns0) / (2 * requests),
        "decided": decided,
        "refused": answers.get(409, 0),
        "twice": int(twice[0]) if twice else -1,
        "left": left,
        "rate": requests / wall,
    }
    print(
        f"{name:>7} (ledger_pool_size={pool_size}): decide p50 {result['decide_p50']:.0f} ms p95 "
        f"{result['decide_p95']:.0f} ms; open p50 {result['open_p50']:.0f} ms p95 {result['open_p95']:.0f} ms; "
        f"{result['rate']:.0f} items/s; per request {result['trips_per_request']:.1f} ledger round trips, "
        f"{result['connections_per_request']:.2f} new connections; answers {dict(sorted(answers.items()))}; "
        f"decided twice {result['twice']}, still waiting {left}"
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--reviewers", type=int, default=20)
    args = parser.parse_args()

    tag = os.getpid()
    meta_db, ledger_db = f"airflow_bench_rapi_{tag}", f"conveyor_bench_rapi_{tag}"
    work = Path(tempfile.mkdtemp(prefix="conveyor-bench-review-api-"))
    ledger_dsn = scratch_database(ledger_db)
    ledger = Ledger(ledger_dsn)
    ledger.upgrade()
    declare_all(ledger)
    create_metadata_db(meta_db)
    if urlsplit(ledger_dsn).hostname != "127.0.0.1":
        raise SystemExit(f"the relay needs the test PostgreSQL on 127.0.0.1 TCP, got {ledger_dsn}")
    relay = CountingRelay(urlsplit(ledger_dsn).port or 5432)
    os.environ.update(
        AIRFLOW_HOME=str(work / "airflow"),
        AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=postgres.sqlalchemy_url_for(meta_db),
        AIRFLOW__API_AUTH__JWT_SECRET="conveyor-bench-jwt-secret",
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        CONVEYOR_LEDGER_DSN=f"postgresql://postgres@127.0.0.1:{relay.port}/{ledger_db}",
    )
    print(f"review API bench: {args.items} items per phase, {args.reviewers} reviewers, {os.cpu_count()} cores")
    try:
        old = phase("old", 0, args, ledger, relay, work)
        new = phase("pooled", 1, args, ledger, relay, work)
        wide = phase("pool 4", 4, args, ledger, relay, work)
    finally:
        drop(meta_db)
        drop(ledger_db)
    print(f"RATIO decide_p95 pooled/old = {new['decide_p95'] / old['decide_p95']:.2f} "
          f"(goal: pooled p95 <= 300 ms on a quiet machine; it is {new['decide_p95']:.0f} ms)")
    print(f"RATIO round_trips_per_request pooled/old = {new['trips_per_request'] / old['trips_per_request']:.2f}")
    print(f"RATIO items_per_second pooled/old = {new['rate'] / old['rate']:.2f}")
    print(f"RATIO round_trips_per_request pool4/old = {wide['trips_per_request'] / old['trips_per_request']:.2f}")
    print(f"RATIO decide_p95 pool4/old = {wide['decide_p95'] / old['decide_p95']:.2f}")
    print(f"decided twice: {old['twice'] + new['twice'] + wide['twice']} (goal 0)")


if __name__ == "__main__":
    main()
