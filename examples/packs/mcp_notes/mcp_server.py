"""A stateful MCP tool server for the mcp_notes pack (the official `mcp` SDK, stdio transport).

The runner starts one per trial with TOLOKAFORGE_DB_URL and TOLOKAFORGE_TRIAL_ID in the environment.
The server keeps no state of its own: it reads and writes the trial's `notes` table in the DB
service, so the grader hashes exactly what the server changed, and ResetTrial undoes it.
"""

from __future__ import annotations

import json
import os
import urllib.parse
import urllib.request
from typing import Any

from mcp.server.mcpserver import MCPServer

server = MCPServer("notes")


def _db(method: str, path: str, body: Any = None) -> Any:
    trial = urllib.parse.quote(os.environ["TOLOKAFORGE_TRIAL_ID"], safe="")
    url = f"{os.environ['TOLOKAFORGE_DB_URL']}/trials/{trial}{path}"
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.loads(answer.read() or b"null")


def _notes() -> dict[str, Any]:
    return _db("GET", "/state?tables=notes")["tables"]["notes"]


@server.tool()
def get_note(note_id: str) -> str:
    """Return one note as JSON: its title, text and tags."""
    notes = _notes()
    if note_id not in notes:
        raise ValueError(f"Note {note_id} not found")
    return json.dumps(notes[note_id], sort_keys=True)


@server.tool()
def add_note(note_id: str, title: str, text: str) -> str:
    """Create a note under a new id (fails if the id is taken)."""
    if note_id in _notes():
        raise ValueError(f"Note {note_id} already exists")
    record: dict[str, Any] = {"title": title, "text": text, "tags": []}
    _db("PATCH", "/state/notes", {"operations": [{"op": "insert", "key": note_id, "record": record}]})
    return f"Note {note_id} created"


@server.tool()
def tag_note(note_id: str, tag: str) -> str:
    """Add a tag to a note (a no-op if it already has it)."""
    notes = _notes()
    if note_id not in notes:
        raise ValueError(f"Note {note_id} not found")
    tags = sorted({*notes[note_id]["tags"], tag})
    _db("PATCH", "/state/notes", {"operations": [{"op": "update", "key": note_id, "set": {"tags": tags}}]})
    return f"Note {note_id} tagged {tag}"


@server.tool()
def delete_note(note_id: str) -> str:
    """Delete a note for good."""
    if note_id not in _notes():
        raise ValueError(f"Note {note_id} not found")
    _db("PATCH", "/state/notes", {"operations": [{"op": "delete", "key": note_id}]})
    return f"Note {note_id} deleted"


if __name__ == "__main__":
    server.run()
