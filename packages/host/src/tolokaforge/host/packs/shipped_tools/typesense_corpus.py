"""A corpus kept in a Typesense server, for ``search_kb`` where a user runs one (docs/pack-format.md#initial_state).

Shipped beside knowledge_base.py; used instead of the embedded index when ``services.json`` names a
server (the host copies ``TOLOKAFORGE_TYPESENSE_URL`` there when it loads the pack). The API key is
read from ``TYPESENSE_API_KEY``, the public project's variable, in the process that runs the tool, so
it never travels in the pack's bundle.

A corpus becomes one collection named by the digest of its documents: indexing the same documents
again finds the collection and leaves it as it is, so a server serves many runs. Only the search API's
documented subset is used: create a collection, import documents (JSON lines, upsert), search one
field (``q``, ``query_by``, ``per_page``), read a collection.
"""

from __future__ import annotations

import hashlib
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, cast

__all__ = ["TypesenseCorpus"]

API_KEY_VARIABLE = "TYPESENSE_API_KEY"
_TIMEOUT_S = 10.0


class TypesenseError(Exception):
    """The server answered an error (``status``), or could not be reached (``status`` None)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class TypesenseCorpus:
    """One corpus as a Typesense collection; ``search`` answers like the embedded index's."""

    method = "typesense"

    def __init__(self, url: str, documents: list[tuple[str, str, str]]) -> None:
        key = os.environ.get(API_KEY_VARIABLE)
        if not key:
            raise TypesenseError(
                f"search_kb is set to use the Typesense server at {url}, but {API_KEY_VARIABLE} is not set "
                "where the tool runs (a sandboxed worker gets no environment of the runner's: see "
                "docs/pack-format.md)"
            )
        self._url = url.rstrip("/")
        self._key = key
        digest = hashlib.sha256(json.dumps(documents).encode()).hexdigest()[:16]
        self.collection = f"tolokaforge_kb_{digest}"
        self.size = len(documents)
        if not self._exists():
            self._create(documents)

    def search(self, query: str, top_k: int) -> list[tuple[str, str, str, float]]:
        if not query.strip():
            return []
        parameters = urllib.parse.urlencode({"q": query, "query_by": "text", "per_page": top_k})
        answer = self._call("GET", f"/collections/{self.collection}/documents/search?{parameters}")
        hits = cast(list[dict[str, Any]], answer.get("hits", []))
        found: list[tuple[str, str, str, float]] = []
        for hit in hits[:top_k]:
            document = cast(dict[str, Any], hit["document"])
            found.append(
                (
                    str(document["doc_id"]),
                    str(document["source"]),
                    str(document["text"]),
                    float(hit["text_match"]),
                )
            )
        return found

    def _exists(self) -> bool:
        try:
            self._call("GET", f"/collections/{self.collection}")
        except TypesenseError as error:
            if error.status == 404:
                return False
            raise
        return True

    def _create(self, documents: list[tuple[str, str, str]]) -> None:
        fields = [{"name": name, "type": "string"} for name in ("doc_id", "source", "text")]
        self._call("POST", "/collections", json.dumps({"name": self.collection, "fields": fields}).encode())
        lines = "\n".join(
            json.dumps({"id": str(index), "doc_id": doc_id, "source": source, "text": text})
            for index, (doc_id, source, text) in enumerate(documents)
        )
        path = f"/collections/{self.collection}/documents/import?action=upsert"
        reply = self._request("POST", path, lines.encode(), "text/plain")
        failed = [line for line in reply.splitlines() if line.strip() and not json.loads(line).get("success")]
        if failed:
            raise TypesenseError(
                f"Typesense refused {len(failed)} documents of {self.collection}: {failed[0]}"
            )

    def _call(self, method: str, path: str, body: bytes | None = None) -> dict[str, Any]:
        return cast(dict[str, Any], json.loads(self._request(method, path, body, "application/json")))

    def _request(self, method: str, path: str, body: bytes | None, kind: str) -> str:
        request = urllib.request.Request(self._url + path, data=body, method=method)
        request.add_header("X-TYPESENSE-API-KEY", self._key)
        request.add_header("Content-Type", kind)
        try:
            with urllib.request.urlopen(request, timeout=_TIMEOUT_S) as response:
                return cast(bytes, response.read()).decode("utf-8")
        except urllib.error.HTTPError as error:
            detail = error.read().decode("utf-8", "replace")[:300]
            raise TypesenseError(
                f"Typesense {method} {path}: HTTP {error.code}: {detail}", error.code
            ) from error
        except OSError as error:
            raise TypesenseError(f"Typesense server at {self._url} unreachable: {error}") from error
