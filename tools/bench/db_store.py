"""Benchmark of the DB service's hot paths, each figure printed beside its floor measured in the same run.

    uv run python tools/bench/db_store.py [--sizes 1000,10000,100000] [--requests 4000]

(a) stable hash after one record changed  vs  sha256 over the canonical bytes of that state
(b) init + cold stable hash               vs  a JSON round trip of the tables + json.dumps(sort_keys) + sha256
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
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import aiohttp
import asyncpg  # pyright: ignore[reportMissingTypeStubs]
import httpx
import uvicorn
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tolokaforge.core.credentials import bearer, new_token, read_token_file, write_token_file
from tolokaforge.core.stable_hash import canonical_bytes, strip_unstable
from tolokaforge.db import LocalStateClient, MemoryStore, PostgresStore, Settings, Store, create_app

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


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:9.3f} ms"


def _one_update(index: int, balance: float) -> list[dict[str, Any]]:
    return [
        {
            "table_name": "records",
            "operations": [{"op": "update", "index": index, "set": {"balance": balance}}],
        }
    ]


async def _memory_trial(
    tables: dict[str, Any], trial_id: str = "bench:0", *, store: Store | None = None
) -> LocalStateClient:
    """A memory store holding ``tables`` as ``trial_id``, reached through the in-process client."""
    client = await LocalStateClient.open(store or MemoryStore())
    unstable = [{"table_name": table, "field_name": name} for table, name in UNSTABLE]
    await client.init_trial(trial_id, tables, unstable_fields=unstable)
    return client


async def bench_hashes(size: int) -> None:
    tables = make_tables(size)
    repeat = 7 if size <= 10_000 else 5
    client = await _memory_trial(tables)
    await client.get_hashes("bench:0")  # warm every chunk's cache

    # (a) one record changed, then the stable hash (the store hashes lazily: get_hashes pays for it).
    rng = random.Random(size)
    samples: list[float] = []
    for _ in range(repeat):
        await client.patch("bench:0", _one_update(rng.randrange(size), rng.random()))
        started = time.perf_counter()
        await client.get_hashes("bench:0")
        samples.append(time.perf_counter() - started)
    warm = statistics.median(samples)
    stable = (await client.get_state("bench:0", stable=True)).tables
    stable_bytes = canonical_bytes(stable)  # the bytes the stable hash covers (tests prove the equality)
    floor_a = median_time(lambda: hashlib.sha256(stable_bytes).hexdigest(), repeat)
    await client.aclose()
    print(
        f"  (a) hash after 1 change {_ms(warm)}   floor sha256 {_ms(floor_a)}   ratio {warm / floor_a:5.2f}x"
    )

    # (b) cold: a fresh trial, nothing cached. Over the public API init answers with the trial's hashes,
    # so it is timed whole (validation, the wire copy, chunk build, the cold stable hash) against what any
    # init must at least do with the same tables: one JSON round trip plus json+sha256 of the stable part.
    stable_tables = strip_unstable(tables, UNSTABLE)
    cold_samples: list[float] = []
    for _ in range(repeat):
        started = time.perf_counter()
        fresh = await _memory_trial(tables)
        cold_samples.append(time.perf_counter() - started)
        await fresh.aclose()
    cold = statistics.median(cold_samples)

    def floor_work() -> None:
        json.loads(json.dumps(tables))
        hashlib.sha256(json.dumps(stable_tables, sort_keys=True, separators=(",", ":")).encode()).hexdigest()

    floor_b = median_time(floor_work, repeat)
    print(
        f"  (b) init + cold stable hash {_ms(cold)}   floor json round trip + json+sha {_ms(floor_b)}   "
        f"ratio {cold / floor_b:5.2f}x"
    )


async def bench_snapshots(size: int) -> None:
    tables = make_tables(size)
    client = await _memory_trial(tables)
    await client.get_hashes("bench:0")
    counter = {"n": 0}

    async def cycle() -> None:
        counter["n"] += 1
        name = f"s{counter['n']}"
        await client.create_snapshot("bench:0", name)
        await client.patch("bench:0", _one_update(counter["n"] % size, 1.5))
        await client.restore_snapshot("bench:0", name)
        await client.delete_snapshot("bench:0", name)

    ours = await amedian_time(cycle, 25)
    await client.aclose()
    floor = median_time(lambda: copy.deepcopy(tables), 3 if size >= 100_000 else 7)
    print(
        f"  (c) snapshot+change+restore {_ms(ours)}   floor deepcopy {_ms(floor)}   ratio {ours / floor:7.5f}x"
    )


# --- (d) HTTP -----------------------------------------------------------------------------------------


async def _echo(request: Request) -> Response:
    return Response(await request.body(), media_type="application/json")


def serve(port: int, size: int, token_file: Path) -> None:
    """Child process: the real app on a memory store, plus POST /echo, with one trial of ``size`` records;
    every request (the echo's too) presents the token in ``token_file``."""
    token = read_token_file(token_file, flag="--token-file")

    async def main() -> None:
        store = MemoryStore()
        await _memory_trial(make_tables(size), store=store)
        echo = Route("/echo", _echo, methods=["POST"])
        app = create_app(Settings(token=token), store=store, extra_routes=[echo], owns_store=False)
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
    token = new_token()
    tokens = tempfile.TemporaryDirectory(prefix="tf-bench-token-")
    token_file = Path(tokens.name) / "db.token"
    write_token_file(token_file, token)
    headers = {"Authorization": bearer(token)}
    serving = ["--serve", str(port), "--sizes", str(size), "--token-file", str(token_file)]
    child = subprocess.Popen([sys.executable, __file__, *serving])
    base = f"http://127.0.0.1:{port}"
    try:
        async with aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=IN_FLIGHT), headers=headers
        ) as session:
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
        async with httpx.AsyncClient(limits=limits, headers=headers) as client:

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
        tokens.cleanup()


# --- (e) PostgreSQL writes --------------------------------------------------------------------------

PG_DSN = os.environ.get("TOLOKAFORGE_BENCH_PG_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")


async def _pg_patch_time(client: LocalStateClient, trial_id: str, size: int) -> float:
    await client.init_trial(trial_id, {"records": make_tables(size)["records"]})
    counter = {"n": 0}

    async def write() -> None:
        counter["n"] += 1
        await client.patch(trial_id, _one_update((counter["n"] * 7919) % size, 1.5))

    return await amedian_time(write, 200)


async def bench_postgres(sizes: list[int]) -> None:
    database = f"tf_bench_{os.getpid()}"
    connect: Any = asyncpg.connect  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    admin: Any = await connect(PG_DSN)
    await admin.execute(f'CREATE DATABASE "{database}"')
    dsn = urlunsplit(urlsplit(PG_DSN)._replace(path="/" + database))
    store = PostgresStore(dsn)
    client = await LocalStateClient.open(store)
    try:
        small = await _pg_patch_time(client, "small", 100)
        conn: Any = await connect(dsn)

        async def bump() -> None:
            async with conn.transaction():
                await conn.fetchrow("SELECT version FROM tf_trials WHERE trial_id = 'small' FOR UPDATE")
                await conn.execute("UPDATE tf_trials SET version = version WHERE trial_id = 'small'")

        commit = await amedian_time(bump, 200)
        await conn.close()
        print("PostgreSQL store, one-record PATCH")
        for size in sizes:
            ours = await _pg_patch_time(client, f"t{size}", size)
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
        await bench_hashes(size)
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
    parser.add_argument("--token-file", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    if args.serve:
        serve(args.serve, sizes[0], args.token_file)
        return
    asyncio.run(run(sizes, args.requests))


if __name__ == "__main__":
    main()
