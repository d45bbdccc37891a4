"""Benchmark of the DB service's hot paths, each figure printed beside its floor measured in the same run.

    uv run python tools/bench/db_store.py [--sizes 1000,10000,100000] [--requests 4000]

(a) stable hash after one record changed  vs  sha256 over the canonical bytes of that state
(b) cold stable hash                      vs  json.dumps(sort_keys, compact) + sha256 of the stable state
(c) snapshot + one change + restore        vs  copy.deepcopy of the state       (memory store)
(d) PATCH operations/s over HTTP           vs  a bare echo endpoint on the same server (64 in flight)
    plus the same PATCH load from httpx.AsyncClient, the measurement behind HttpStateClient's choice.
(e) one-record PATCH on the PostgreSQL store vs  the same PATCH into a 100-record table, and a bare
    transaction that locks and bumps the trial's row (the commit every write pays)
    (PostgreSQL from TOLOKAFORGE_BENCH_PG_DSN, default the local trust-auth server; a scratch database)

Data is seeded; times are medians of several repetitions (these machines are noisy: compare ratios).
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import hashlib
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import aiohttp
import asyncpg  # pyright: ignore[reportMissingTypeStubs]
import httpx
import uvicorn
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tolokaforge.core.stable_hash import strip_unstable
from tolokaforge.db.app import create_app
from tolokaforge.db.memory import MemoryStore
from tolokaforge.db.operations import TableChange, apply_changes
from tolokaforge.db.postgres import PostgresStore
from tolokaforge.db.settings import Settings
from tolokaforge.db.state import TrialState
from tolokaforge.db.store import TrialInit
from tolokaforge.db.tables import build_table

UNSTABLE = [("records", "created_at")]
IN_FLIGHT = 64


def make_tables(size: int, seed: int = 7) -> dict[str, Any]:
    rng = random.Random(seed)
    records = [
        {
            "id": f"R-{index:06d}",
            "owner": rng.choice(["Mia Li", "Zoë Ångström", "Ivan", "Ana"]),
            "balance": round(rng.uniform(0, 10_000), 2),
            "tags": rng.sample(["a", "b", "c", "d", "e"], 2),
            "active": rng.random() < 0.5,
            "created_at": f"2026-01-{1 + index % 28:02d}T00:00:00",
        }
        for index in range(size)
    ]
    return {"records": records, "meta": {"schema": {"version": 1}}}


def median_time(action: Callable[[], object], repeat: int) -> float:
    samples: list[float] = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


async def amedian_time(action: Callable[[], Awaitable[object]], repeat: int) -> float:
    samples: list[float] = []
    for _ in range(repeat):
        started = time.perf_counter()
        await action()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def _state(tables: dict[str, Any]) -> TrialState:
    unstable = {name: frozenset(f for t, f in UNSTABLE if t == name) for name, _ in UNSTABLE}
    return TrialState({name: build_table(value) for name, value in tables.items()}, unstable)


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:9.3f} ms"


def bench_hashes(size: int) -> None:
    tables = make_tables(size)
    repeat = 7 if size <= 10_000 else 5
    state = _state(tables)
    _ = state.stable_hash  # warm every chunk's cache

    # (a) one record changed, then the stable hash.
    rng = random.Random(size)
    holder = {"state": state}

    def change_one() -> TrialState:
        operation = {"op": "update", "index": rng.randrange(size), "set": {"balance": rng.random()}}
        edited, _ = apply_changes(holder["state"].tables.get, [TableChange("records", [operation])], {})
        return holder["state"].replace_tables(edited)

    samples: list[float] = []
    changed = state
    for _ in range(repeat):
        changed = change_one()
        started = time.perf_counter()
        _ = changed.stable_hash
        samples.append(time.perf_counter() - started)
        holder["state"] = changed
    warm = statistics.median(samples)
    stable_bytes = changed.encode(stable=True)  # the reference bytes (tests prove the equality)
    floor_a = median_time(lambda: hashlib.sha256(stable_bytes).hexdigest(), repeat)
    print(
        f"  (a) hash after 1 change {_ms(warm)}   floor sha256 {_ms(floor_a)}   ratio {warm / floor_a:5.2f}x"
    )

    # (b) cold: fresh tables, nothing cached.
    stable_tables = strip_unstable(tables, UNSTABLE)
    cold = median_time(lambda: _state(tables).stable_hash, repeat)
    build = median_time(lambda: _state(tables), repeat)
    floor_b = median_time(
        lambda: hashlib.sha256(
            json.dumps(stable_tables, sort_keys=True, separators=(",", ":")).encode("utf-8")
        ).hexdigest(),
        repeat,
    )
    cold_hash = cold - build
    print(
        f"  (b) cold stable hash    {_ms(cold_hash)}   floor json+sha {_ms(floor_b)}   "
        f"ratio {cold_hash / floor_b:5.2f}x   (chunk build, excluded: {_ms(build).strip()})"
    )


async def bench_snapshots(size: int) -> None:
    tables = make_tables(size)
    store = MemoryStore()
    app_spec = create_app(Settings(), store=store).state.service
    await app_spec.init_trial("bench:0", {"tables": json.loads(json.dumps(tables))})
    await store.hashes("bench:0")
    counter = {"n": 0}

    async def cycle() -> None:
        counter["n"] += 1
        name = f"s{counter['n']}"
        await store.create_snapshot("bench:0", name)
        operation = {"op": "update", "index": counter["n"] % size, "set": {"balance": 1.5}}
        await store.patch("bench:0", [TableChange("records", [operation])], None)
        await store.restore_snapshot("bench:0", name)
        await store.delete_snapshot("bench:0", name)

    ours = await amedian_time(cycle, 25)
    floor = median_time(lambda: copy.deepcopy(tables), 3 if size >= 100_000 else 7)
    print(
        f"  (c) snapshot+change+restore {_ms(ours)}   floor deepcopy {_ms(floor)}   ratio {ours / floor:7.5f}x"
    )


# --- (d) HTTP -----------------------------------------------------------------------------------------


async def _echo(request: Request) -> Response:
    return Response(await request.body(), media_type="application/json")


def serve(port: int, size: int) -> None:
    """Child process: the real app on a memory store, plus POST /echo, with one trial of ``size`` records."""

    async def main() -> None:
        store = MemoryStore()
        app = create_app(Settings(), store=store, extra_routes=[Route("/echo", _echo, methods=["POST"])])
        await app.state.service.init_trial("bench:0", {"tables": make_tables(size)})
        config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)
        await uvicorn.Server(config).serve()

    asyncio.run(main())


async def _load(send: Callable[[int], Awaitable[int]], total: int) -> float:
    queue = iter(range(total))
    statuses: list[int] = []

    async def worker() -> None:
        for index in queue:
            statuses.append(await send(index))

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))
    elapsed = time.perf_counter() - started
    assert set(statuses) == {200}, set(statuses)
    return total / elapsed


async def bench_http(size: int, total: int) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    child = subprocess.Popen([sys.executable, __file__, "--serve", str(port), "--sizes", str(size)])
    base = f"http://127.0.0.1:{port}"
    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=IN_FLIGHT)) as session:
            for _ in range(400):
                try:
                    async with session.get(base + "/health") as response:
                        if response.status == 200:
                            break
                except aiohttp.ClientConnectionError:
                    await asyncio.sleep(0.05)

            def patch_body(index: int) -> bytes:
                operation = {"op": "update", "index": index % size, "set": {"balance": index}}
                return json.dumps({"operations": [operation]}).encode()

            async def patch(index: int) -> int:
                url = base + "/trials/bench:0/state/records"
                async with session.patch(url, data=patch_body(index)) as response:
                    await response.read()
                    return response.status

            async def echo(index: int) -> int:
                async with session.post(base + "/echo", data=patch_body(index)) as response:
                    await response.read()
                    return response.status

            await _load(echo, 500)  # warm up connections
            patch_rate = await _load(patch, total)
            echo_rate = await _load(echo, total)
        limits = httpx.Limits(max_connections=IN_FLIGHT)
        async with httpx.AsyncClient(limits=limits) as client:

            async def httpx_patch(index: int) -> int:
                response = await client.patch(
                    base + "/trials/bench:0/state/records", content=patch_body(index)
                )
                return response.status_code

            httpx_rate = await _load(httpx_patch, max(total // 4, 500))
        print(
            f"  (d) PATCH over HTTP {patch_rate:8.0f} ops/s   floor echo {echo_rate:8.0f} req/s   "
            f"ratio {patch_rate / echo_rate:5.2f}   (httpx client, same PATCH load: {httpx_rate:.0f} ops/s)"
        )
    finally:
        child.terminate()
        child.wait(10)


# --- (e) PostgreSQL writes --------------------------------------------------------------------------

PG_DSN = os.environ.get("TOLOKAFORGE_BENCH_PG_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")


async def _pg_patch_time(store: PostgresStore, trial_id: str, size: int) -> float:
    await store.init_trial(
        trial_id, TrialInit({"records": build_table(make_tables(size)["records"])}, {}, [], {})
    )
    counter = {"n": 0}

    async def write() -> None:
        counter["n"] += 1
        operation = {"op": "update", "index": (counter["n"] * 7919) % size, "set": {"balance": 1.5}}
        await store.patch(trial_id, [TableChange("records", [operation])], None)

    return await amedian_time(write, 200)


async def bench_postgres(sizes: list[int]) -> None:
    database = f"tf_bench_{os.getpid()}"
    connect: Any = asyncpg.connect  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    admin: Any = await connect(PG_DSN)
    await admin.execute(f'CREATE DATABASE "{database}"')
    dsn = urlunsplit(urlsplit(PG_DSN)._replace(path="/" + database))
    store = PostgresStore(dsn)
    try:
        await store.start()
        small = await _pg_patch_time(store, "small", 100)
        conn: Any = await connect(dsn)

        async def bump() -> None:
            async with conn.transaction():
                await conn.fetchrow("SELECT version FROM tf_trials WHERE trial_id = 'small' FOR UPDATE")
                await conn.execute("UPDATE tf_trials SET version = version WHERE trial_id = 'small'")

        commit = await amedian_time(bump, 200)
        await conn.close()
        print("PostgreSQL store, one-record PATCH")
        for size in sizes:
            ours = await _pg_patch_time(store, f"t{size}", size)
            print(
                f"  (e) {size:>7,} records {_ms(ours)}   floor: 100 records {_ms(small)} "
                f"({ours / small:4.2f}x), bare locked commit {_ms(commit)} ({ours / commit:4.2f}x)"
            )
    finally:
        await store.close()
        await admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        await admin.close()


async def run(sizes: list[int], total: int) -> None:
    for size in sizes:
        print(f"{size:,} records")
        bench_hashes(size)
        await bench_snapshots(size)
        await bench_http(size, total)
    await bench_postgres(sizes)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--requests", type=int, default=4000, help="PATCH requests per HTTP measurement")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    if args.serve:
        serve(args.serve, sizes[0])
        return
    asyncio.run(run(sizes, args.requests))


if __name__ == "__main__":
    main()
