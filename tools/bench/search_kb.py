"""Benchmark: ``search_kb`` over a 10k-document corpus, through a real runner, beside the bare engine query.

    uv run python tools/bench/search_kb.py [--documents 10000] [--queries 500]

Writes a pack with one task whose ``initial_state.rag`` corpus holds ``--documents`` generated
documents (about 120 words each, drawn from a 5k-word vocabulary), loads it with the host's pack
loader, registers a trial on an embedded runner through the host's runner client, as ``tolokaforge run``
does (the tool in its sandboxed worker, the default), and times ExecuteTool calls of ``search_kb`` (3-word queries, top 5). The floor, in the same run: the same
queries as bare SQLite FTS5 statements on an index of the same documents in this process. It prints
p50/p99 of both, the one-off index build (in the runner's zygote, once per pack), and the goal:
p50 through the tool path at most 5 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from tolokaforge.contracts.runner import ExecutionStatus
from tolokaforge.core.runner_api import Runner, ToolCallRequest
from tolokaforge.host import build_trial_spec, load_pack, open_runner

GOAL_MS = 5.0


def _vocabulary(rng: random.Random) -> list[str]:
    letters = "abcdefghijklmnop"
    return sorted({"".join(rng.choice(letters) for _ in range(6)) for _ in range(5000)})


def _write_pack(root: Path, documents: int, words: list[str], rng: random.Random) -> list[str]:
    task = root / "tasks" / "kb"
    corpus = task / "rag" / "corpus"
    corpus.mkdir(parents=True)
    texts: list[str] = []
    for index in range(documents):
        text = " ".join(rng.choice(words) for _ in range(120))
        (corpus / f"doc{index:05d}.md").write_text(text)
        texts.append(text)
    (root / "pack.yaml").write_text("name: kb_bench\nversion: 0.0.1\n")
    (task / "task.yaml").write_text(
        "task_id: kb\ninitial_state:\n  tables: {t: {a: {x: 1}}}\n  rag: {corpus_dir: rag/corpus}\n"
        "tools: {agent: {enabled: [search_kb]}}\ngrading: grading.yaml\n"
    )
    (task / "grading.yaml").write_text(
        "combine: {method: all, weights: {state_checks: 1.0}, pass_threshold: 1.0}\n"
        "state_checks:\n  hash:\n    enabled: true\n    golden_actions: [{name: search_kb, kwargs: {query: x}}]\n"
    )
    return texts


def _percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered) * 1000, ordered[int(len(ordered) * 0.99) - 1] * 1000


def _bare(texts: list[str], queries: list[str]) -> tuple[float, list[float]]:
    db = sqlite3.connect(":memory:")
    started = time.perf_counter()
    db.execute(
        "CREATE VIRTUAL TABLE d USING fts5(doc_id UNINDEXED, source UNINDEXED, text, tokenize='unicode61')"
    )
    db.executemany("INSERT INTO d VALUES (?, ?, ?)", [(str(i), f"doc{i}.md", t) for i, t in enumerate(texts)])
    build = time.perf_counter() - started
    sql = "SELECT doc_id, source, text, -bm25(d) FROM d WHERE d MATCH ? ORDER BY bm25(d) LIMIT 5"
    samples: list[float] = []
    for query in queries:
        match = " OR ".join(f'"{word}"' for word in query.split())
        started = time.perf_counter()
        db.execute(sql, (match,)).fetchall()
        samples.append(time.perf_counter() - started)
    return build, samples


async def _through_runner(root: Path, queries: list[str]) -> tuple[float, list[float]]:
    [loaded] = load_pack(root).tasks
    spec = build_trial_spec(loaded.task, run_id="bench", trial_index=0)
    async with open_runner(None) as runner:  # what `tolokaforge run` uses: embedded, called in process
        started = time.perf_counter()
        await runner.register(spec)
        await _call(runner, spec.trial_id, queries[0], 0)  # the worker's first call
        setup = time.perf_counter() - started
        samples: list[float] = []
        for n, query in enumerate(queries, start=1):
            started = time.perf_counter()
            await _call(runner, spec.trial_id, query, n)
            samples.append(time.perf_counter() - started)
        await runner.release(spec.trial_id)
        return setup, samples


async def _call(runner: Runner, trial_id: str, query: str, n: int) -> None:
    arguments = json.dumps({"query": query, "top_k": 5})
    result = await runner.execute(ToolCallRequest(trial_id, f"c{n}", "search_kb", arguments, "agent"))
    assert result.status == ExecutionStatus.SUCCESS, result.failure


def main() -> None:
    parser = argparse.ArgumentParser(
        description="search_kb over a large corpus: tool path beside the bare engine"
    )
    parser.add_argument("--documents", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=500)
    args = parser.parse_args()
    rng = random.Random(7)
    words = _vocabulary(rng)
    queries = [" ".join(rng.sample(words, 3)) for _ in range(args.queries)]
    with tempfile.TemporaryDirectory() as folder:
        texts = _write_pack(Path(folder), args.documents, words, rng)
        build, bare = _bare(texts, queries)
        setup, tool = asyncio.run(_through_runner(Path(folder), queries))
    bare_p50, bare_p99 = _percentiles(bare)
    tool_p50, tool_p99 = _percentiles(tool)
    print(f"search_kb over {args.documents} documents, {args.queries} queries (3 words, top 5)")
    print(
        f"  bare FTS5 query (floor)      p50 {bare_p50:7.3f} ms   p99 {bare_p99:7.3f} ms   index build {build:.2f} s"
    )
    print(
        f"  ExecuteTool search_kb        p50 {tool_p50:7.3f} ms   p99 {tool_p99:7.3f} ms   register + first call {setup:.2f} s"
    )
    verdict = "met" if tool_p50 <= GOAL_MS else "MISSED"
    print(
        f"  goal: tool-path p50 <= {GOAL_MS} ms: {verdict} (overhead over the floor {tool_p50 - bare_p50:.3f} ms)"
    )


if __name__ == "__main__":
    main()
