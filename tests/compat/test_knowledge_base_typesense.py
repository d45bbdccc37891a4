"""``search_kb`` over a Typesense server: the knowledge_base proof pack with its corpus kept in a server.

No Typesense binary can be installed here, so the server is a real HTTP server on loopback speaking the
part of Typesense's API the adapter uses (collections, JSON-lines import, single-field search, the API
key header) with the answers' documented shapes. The same pack passes golden replay with its corpus in
the server (trusted mode: the tool runs in the runner, which holds the key); a sandboxed run, whose
workers get none of the runner's environment, is refused naming the missing key rather than silently
searching the embedded index instead.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml

if TYPE_CHECKING:
    from conftest import Cli

PACK = Path(__file__).parent / "packs" / "knowledge_base"
KEY = "test-key-3141"


class _Typesense(BaseHTTPRequestHandler):
    collections: ClassVar[dict[str, dict[str, Any]]] = {}
    searches: ClassVar[list[dict[str, list[str]]]] = []

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _answer(self, status: int, body: Any, *, lines: bool = False) -> None:
        data = "\n".join(json.dumps(line) for line in body) if lines else json.dumps(body)
        self.send_response(status)
        self.send_header("Content-Type", "text/plain" if lines else "application/json")
        self.send_header("Content-Length", str(len(data.encode())))
        self.end_headers()
        self.wfile.write(data.encode())

    def _authorised(self) -> bool:
        if self.headers.get("X-TYPESENSE-API-KEY") == KEY:
            return True
        self._answer(401, {"message": "Forbidden - a valid `x-typesense-api-key` header must be sent."})
        return False

    def _body(self) -> str:
        return self.rfile.read(int(self.headers.get("Content-Length", "0"))).decode()

    def do_GET(self) -> None:
        if not self._authorised():
            return
        url = urlsplit(self.path)
        parts = url.path.strip("/").split("/")
        collection = self.collections.get(parts[1]) if len(parts) > 1 else None
        if collection is None:
            self._answer(404, {"message": "Not Found"})
        elif len(parts) == 2:
            self._answer(
                200,
                {"name": parts[1], "fields": collection["fields"], "num_documents": len(collection["docs"])},
            )
        elif parts[2:] == ["documents", "search"]:
            query = parse_qs(url.query)
            self.searches.append(query)
            words = set(re.findall(r"\w+", query["q"][0].lower()))
            field = query["query_by"][0]
            scored = [
                (len(words & set(re.findall(r"\w+", doc[field].lower()))), doc) for doc in collection["docs"]
            ]
            hits = sorted((hit for hit in scored if hit[0]), key=lambda hit: -hit[0])
            per_page = int(query.get("per_page", ["10"])[0])
            no_highlights: list[str] = []
            shown = [
                {"document": doc, "text_match": 578730123365187705 + n, "highlights": no_highlights}
                for n, doc in hits
            ]
            self._answer(200, {"found": len(hits), "hits": shown[:per_page], "page": 1})
        else:
            self._answer(404, {"message": "Not Found"})

    def do_POST(self) -> None:
        if not self._authorised():
            return
        url = urlsplit(self.path)
        parts = url.path.strip("/").split("/")
        if parts == ["collections"]:
            schema = json.loads(self._body())
            if schema["name"] in self.collections:
                self._answer(409, {"message": f"A collection with name `{schema['name']}` already exists."})
                return
            self.collections[schema["name"]] = {"fields": schema["fields"], "docs": []}
            self._answer(201, schema)
        elif len(parts) == 4 and parts[2:] == ["documents", "import"] and parts[1] in self.collections:
            docs = [json.loads(line) for line in self._body().splitlines() if line.strip()]
            self.collections[parts[1]]["docs"].extend(docs)
            self._answer(200, [{"success": True} for _ in docs], lines=True)
        else:
            self._answer(404, {"message": "Not Found"})


@pytest.fixture
def typesense(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[_Typesense]]:
    _Typesense.collections = {}
    _Typesense.searches = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Typesense)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("TOLOKAFORGE_TYPESENSE_URL", f"http://127.0.0.1:{server.server_address[1]}")
    monkeypatch.setenv("TYPESENSE_API_KEY", KEY)
    try:
        yield _Typesense
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_golden_replay_passes_with_the_corpus_in_the_server(
    typesense: type[_Typesense], tmp_path: Path, cli: Cli
) -> None:
    run = tmp_path / "run"
    args = ["run", "--pack", str(PACK), "--agent", "golden", "--isolation", "thread", "--output", str(run)]
    code, out = cli(args)
    assert code == 0, out
    assert out.strip().splitlines()[-1] == "exit 0: all 2 trials graded; pass rate 1.000 (2/2 passed)"
    # One collection per corpus of the pack, each named by its documents.
    assert all(name.startswith("tolokaforge_kb_") for name in typesense.collections)
    sources = sorted(sorted(doc["source"] for doc in c["docs"]) for c in typesense.collections.values())
    assert sources == [["expenses.md", "holidays.md"], ["laptops.md", "parking.txt", "travel.md"]]
    assert {"q": ["laptop replacement"], "query_by": ["text"], "per_page": ["2"]} in typesense.searches
    trajectory = yaml.safe_load((run / "trials" / "handbook_lookup" / "0" / "trajectory.yaml").read_text())
    [tool_message] = [m for m in trajectory["messages"] if m["role"] == "tool"]
    [hit] = json.loads(tool_message["content"])["results"]
    assert hit["source"] == "laptops.md" and hit["retrieval_method"] == "typesense" and hit["score"] == 0.5

    # A second run finds the collection (named by its documents) and indexes nothing again.
    code, out = cli([*args[:-1], str(tmp_path / "again")])
    assert code == 0, out
    assert sorted(len(c["docs"]) for c in typesense.collections.values()) == [2, 3]


def test_a_sandboxed_run_is_refused_naming_the_key_it_cannot_see(
    typesense: type[_Typesense], tmp_path: Path, cli: Cli
) -> None:
    run = tmp_path / "run"
    args = [
        "run",
        "--pack",
        str(PACK),
        "--task",
        "handbook_lookup",
        "--agent",
        "golden",
        "--output",
        str(run),
    ]
    code, out = cli(args)
    assert code == 1, out
    summary = yaml.safe_load((run / "summary.yaml").read_text())
    [failure] = summary["failures"]
    assert failure["kind"] == "not_gradeable" and "raised TypesenseError" in failure["reason"], failure
    trajectory = yaml.safe_load((run / "trials" / "handbook_lookup" / "0" / "trajectory.yaml").read_text())
    assert "TYPESENSE_API_KEY is not set where the tool runs" in trajectory["error"], trajectory["error"]
    assert typesense.searches == []
