"""``search_kb``: keyword retrieval over the documents a task declares (docs/pack-format.md#initial_state).

The host ships this file's text into the task's code bundle as ``_tolokaforge_builtin/knowledge_base.py``,
beside ``services.json`` naming every corpus folder the pack's tasks declare (paths relative to the
bundle root, which is the pack root). Importing the module indexes each corpus once in an in-memory
SQLite FTS5 table: the runner's zygote imports a bundle once and forks every trial's worker from it, so
a pack's index is built once per runner and shared copy-on-write by its trials, never per call or per
trial. It imports the standard library only (the worker runs it inside the sandbox). Where the pack
was loaded with a Typesense server configured, each corpus lives in that server instead
(typesense_corpus.py).

A corpus is the ``*.md`` and ``*.txt`` files directly in its folder, each one document (empty ones
skipped), identified by the first 16 hex digits of its text's SHA-256 and named by its file name, as
in the public project. Ranking is BM25; the answer has the public tool's JSON shape.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from .typesense_corpus import TypesenseCorpus

__all__ = ["TOOLS", "Corpus", "Engine", "read_documents", "tool_key"]

SETTINGS_FILE = "services.json"
_TERM = re.compile(r"\w+")


def tool_key(corpus: str) -> str:
    """The name the runner looks the tool up by: one tool class per corpus folder."""
    return f"search_kb:{corpus}"


def read_documents(folder: Path) -> Iterator[tuple[str, str, str]]:
    """``(doc_id, source, text)`` of every non-empty ``.md`` / ``.txt`` file directly in ``folder``."""
    for suffix in ("*.md", "*.txt"):
        for path in sorted(folder.glob(suffix)):
            if not path.is_file():
                continue
            text = path.read_text(encoding="utf-8")
            if text.strip():
                yield hashlib.sha256(text.encode()).hexdigest()[:16], path.name, text


class Engine(Protocol):
    """What answers a corpus's queries: the embedded index, or a Typesense collection."""

    method: str

    def search(self, query: str, top_k: int) -> list[tuple[str, str, str, float]]: ...


class Corpus:
    """One corpus folder, indexed for BM25 ranking in memory."""

    method = "bm25"

    def __init__(self, documents: Iterator[tuple[str, str, str]]) -> None:
        self._db = sqlite3.connect(":memory:", check_same_thread=False)
        # Whole-word tokens, case and diacritics folded, no stemming: close to the public service's
        # lower-cased words, without its punctuation sticking to them ("refund?" still finds "refund").
        self._db.execute(
            "CREATE VIRTUAL TABLE documents USING fts5(doc_id UNINDEXED, source UNINDEXED, text,"
            " tokenize='unicode61')"
        )
        self._db.executemany("INSERT INTO documents VALUES (?, ?, ?)", documents)
        self.size: int = self._db.execute("SELECT count(*) FROM documents").fetchone()[0]
        # Trusted mode calls tools from several threads; one connection answers one query at a time.
        self._lock = threading.Lock()

    def search(self, query: str, top_k: int) -> list[tuple[str, str, str, float]]:
        """The best ``top_k`` documents having any of the query's words: (doc_id, source, text, BM25)."""
        terms = dict.fromkeys(_TERM.findall(query.lower()))
        if not terms:
            return []
        # Each word quoted, so FTS5 operators typed by the model (AND, NEAR, *) are words, not syntax.
        match = " OR ".join(f'"{term}"' for term in terms)
        with self._lock:
            rows = self._db.execute(
                "SELECT doc_id, source, text, -bm25(documents) FROM documents WHERE documents MATCH ?"
                " ORDER BY bm25(documents) LIMIT ?",
                (match, top_k),
            ).fetchall()
        return [(str(r[0]), str(r[1]), str(r[2]), float(r[3])) for r in rows]


def answer(corpus: Engine, query: str, top_k: int, alpha: float) -> str:
    """The public tool's answer: results scored as its service scores them when it has no embeddings.

    The service weighs keyword scores, normalised by the best one, by ``1 - alpha`` and reports the
    method ``bm25`` when no semantic index exists; this harness has none, so it is the same here (a
    Typesense collection's text-match scores are weighed the same way, the method ``typesense``).
    """
    hits = corpus.search(query, top_k)
    if not hits:
        return json.dumps({"message": "No relevant documents found.", "results": [], "query": query})
    best = hits[0][3] or 1.0
    results: list[dict[str, Any]] = [
        {
            "doc_id": doc_id,
            "source": source,
            "score": round((1.0 - alpha) * score / best, 6),
            "text": text,
            "retrieval_method": corpus.method,
        }
        for doc_id, source, text, score in hits
    ]
    return json.dumps({"results": results, "total": len(results), "query": query})


def _tool(corpus: Engine) -> type:
    class SearchKnowledgeBase:
        @staticmethod
        def invoke(data: dict[str, Any], /, query: str, top_k: int = 5, alpha: float = 0.5) -> str:
            return answer(corpus, query, top_k, alpha)

    return SearchKnowledgeBase


def _declared() -> dict[str, type]:
    here = Path(__file__).resolve().parent
    settings_file = here / SETTINGS_FILE
    if not settings_file.is_file():
        return {}
    settings: dict[str, Any] = json.loads(settings_file.read_text(encoding="utf-8"))
    corpora: list[str] = settings.get("corpora", [])
    server: str | None = settings.get("typesense")
    root = here.parent

    def engine(folder: str) -> Engine:
        if server is None:
            return Corpus(read_documents(root / folder))
        return TypesenseCorpus(server, list(read_documents(root / folder)))

    return {tool_key(name): _tool(engine(name)) for name in corpora}


TOOLS: dict[str, type] = _declared()
