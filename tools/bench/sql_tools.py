"""What a ``sql_query`` call costs on each candidate SQL engine, to choose between them.

    uv run python tools/bench/sql_tools.py [--sizes 1000,10000] [--reps 30]

The candidates, over one ``books`` table of N records (8 fields, one a list) and two queries (a
selective filter, a GROUP BY):

- **SQLite in memory** (what ships): the tool itself, ``sql_query`` of the shipped db_tools module,
  taken from the proof pack's tool code as the runner gets it and called on plain tables as in a
  worker: *cold* (the table copied into SQLite, then the query), *warm* (the table unchanged since
  the last call: an identity check, then the query) and *after one write* (one record replaced, so
  the table is copied again, then the query).
- **PostgreSQL, a schema per trial** (the alternative): a typed table in the trial's own schema on
  the local server (TOLOKAFORGE_BENCH_PG_DSN, default the trust-auth server on 127.0.0.1), reached
  with asyncpg: *cold* (CREATE SCHEMA + TABLE, COPY of N rows, the query), *warm* (the query's round
  trip) and *after one write* (the UPDATE every db_update commit would have to mirror, then the query).

Floors in the same run: the bare SQLite query on a table already built (``execute`` + ``fetchall``),
and PostgreSQL's ``SELECT 1`` round trip. Times are medians in ms.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg  # pyright: ignore[reportMissingTypeStubs]

from tolokaforge.host import load_pack

PACK = Path(__file__).resolve().parents[2] / "tests" / "compat" / "packs" / "db_tools"
SHIPPED_PACKAGE = "_tolokaforge_builtin"
PG_DSN = os.environ.get("TOLOKAFORGE_BENCH_PG_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")
QUERIES = {
    "filter": "SELECT isbn, title FROM books WHERE stock = 0 AND price < 20 ORDER BY title LIMIT 20",
    "group by": "SELECT author, count(*) AS n, avg(price) AS p FROM books GROUP BY author ORDER BY n DESC LIMIT 5",
}
COLUMNS = ["isbn", "title", "author", "stock", "price", "signed", "tags", "added"]


def _shipped_module(scratch: Path) -> Any:
    """The db tools exactly as a task carries them (the tool code's files), imported from ``scratch``."""
    task = load_pack(PACK).tasks[0].task
    assert task.tool_code is not None and task.tool_code.files is not None
    for relative, text in task.tool_code.files.items():
        if relative.startswith(SHIPPED_PACKAGE + "/"):
            target = scratch / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
    sys.path.insert(0, str(scratch))
    return importlib.import_module(f"{SHIPPED_PACKAGE}.db_tools")


def make_books(size: int, seed: int = 11) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    authors = [f"Author {index}" for index in range(50)]
    return [
        {
            "isbn": f"978-{index:09d}",
            "title": f"Title {rng.randrange(10**6)}",
            "author": rng.choice(authors),
            "stock": rng.choice([0, 0, 1, 2, 5, 10]),
            "price": round(rng.uniform(3, 40), 2),
            "signed": rng.random() < 0.1,
            "tags": rng.sample(["sf", "classic", "fantasy", "crime", "poetry"], 2),
            "added": f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
        }
        for index in range(size)
    ]


def median_ms(action: Callable[[], object], reps: int) -> float:
    times: list[float] = []
    for _ in range(reps):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


async def amedian_ms(action: Callable[[], Awaitable[object]], reps: int) -> float:
    times: list[float] = []
    for _ in range(reps):
        started = time.perf_counter()
        await action()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def bench_sqlite(tools: Any, size: int, query: str, reps: int) -> dict[str, float]:
    books = make_books(size)
    invoke = tools.SqlQuery.invoke

    def cold() -> None:
        tables = {"books": list(books)}  # a new table object: nothing cached for it
        assert isinstance(invoke(tables, query=query), str)

    warm_tables = {"books": list(books)}
    invoke(warm_tables, query=query)
    counter = {"n": 0}

    def after_write() -> None:
        counter["n"] += 1
        index = (counter["n"] * 7919) % size
        warm_tables["books"][index] = {**warm_tables["books"][index], "stock": counter["n"] % 3}
        assert isinstance(invoke(warm_tables, query=query), str)

    bare = sqlite3.connect(":memory:")
    bare.execute(f"CREATE TABLE books ({', '.join(COLUMNS)})")
    bare.executemany(
        f"INSERT INTO books VALUES ({', '.join('?' for _ in COLUMNS)})",
        [[json.dumps(book[c]) if c == "tags" else book[c] for c in COLUMNS] for book in books],
    )
    # Warm calls and the floor alternate, so a busy moment of the machine hits both alike.
    warm: list[float] = []
    floor: list[float] = []
    for _ in range(reps):
        warm.append(median_ms(lambda: invoke(warm_tables, query=query), 1))
        floor.append(median_ms(lambda: bare.execute(query).fetchall(), 1))
    figures = {
        "cold": median_ms(cold, max(5, reps // 3)),
        "warm": statistics.median(warm),
        "after one write": median_ms(after_write, max(5, reps // 3)),
        "floor: bare query": statistics.median(floor),
    }
    return figures


async def bench_postgres(size: int, query: str, reps: int, conn: Any) -> dict[str, float]:
    books = make_books(size)
    rows = [tuple(json.dumps(book[c]) if c == "tags" else book[c] for c in COLUMNS) for book in books]
    created = {"n": 0}

    async def cold() -> None:
        created["n"] += 1
        schema = f"trial_{created['n']}"
        await conn.execute(f"CREATE SCHEMA {schema}")
        await conn.execute(
            f"CREATE TABLE {schema}.books (isbn text, title text, author text, stock bigint, price double precision, "
            "signed boolean, tags text, added text)"
        )
        await conn.copy_records_to_table("books", records=rows, schema_name=schema)
        await conn.execute(f"SET search_path TO {schema}")
        json.dumps([dict(row) for row in await conn.fetch(query)], default=str)

    cold_ms = await amedian_ms(cold, max(5, reps // 3))
    # The last cold schema is the warm one (search_path points at it).

    async def warm() -> None:
        json.dumps([dict(row) for row in await conn.fetch(query)], default=str)

    counter = {"n": 0}

    async def after_write() -> None:
        counter["n"] += 1
        isbn = books[(counter["n"] * 7919) % size]["isbn"]
        await conn.execute("UPDATE books SET stock = $1 WHERE isbn = $2", counter["n"] % 3, isbn)
        await warm()

    figures = {
        "cold": cold_ms,
        "warm": await amedian_ms(warm, reps),
        "after one write": await amedian_ms(after_write, max(5, reps // 3)),
        "floor: SELECT 1": await amedian_ms(lambda: conn.fetchval("SELECT 1"), reps),
    }
    await conn.execute("SET search_path TO public")
    for index in range(1, created["n"] + 1):
        await conn.execute(f"DROP SCHEMA trial_{index} CASCADE")
    return figures


def _line(engine: str, figures: dict[str, float]) -> str:
    return f"  {engine:<22}" + "  ".join(f"{name} {value:8.3f}" for name, value in figures.items())


async def run(sizes: list[int], reps: int) -> None:
    with tempfile.TemporaryDirectory(prefix="sql_tools_bench_") as scratch:
        tools = _shipped_module(Path(scratch))  # imported: the files are no longer needed
    database = f"tf_bench_sql_{os.getpid()}"
    connect: Any = asyncpg.connect  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    admin: Any = await connect(PG_DSN)
    await admin.execute(f'CREATE DATABASE "{database}"')
    conn: Any = await connect(urlunsplit(urlsplit(PG_DSN)._replace(path="/" + database)))
    try:
        print(
            f"sql_query per call, median ms (python {sys.version.split()[0]}, sqlite {sqlite3.sqlite_version})"
        )
        for size in sizes:
            for label, query in QUERIES.items():
                print(f"{size:,} records, {label}")
                print(_line("SQLite in memory", bench_sqlite(tools, size, query, reps)))
                print(_line("PostgreSQL schema", await bench_postgres(size, query, reps, conn)))
    finally:
        await conn.close()
        await admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        await admin.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--reps", type=int, default=30)
    arguments = parser.parse_args()
    asyncio.run(run([int(size) for size in arguments.sizes.split(",")], arguments.reps))


if __name__ == "__main__":
    main()
