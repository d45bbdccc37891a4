"""The compat suite's collection: the packs' own files are data, not tests of ours.

A terminal task's verifier (the pytest file in its own tests folder) runs in the trial's sandbox
against the agent's work; collected here it would test an empty folder. ``TOLOKAFORGE_PUBLIC_CHECKOUT=none``
leaves out the module that runs the public project's own packs.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tolokaforge.host.cli import main

collect_ignore_glob = ["packs/*"]
if os.environ.get("TOLOKAFORGE_PUBLIC_CHECKOUT") == "none":
    collect_ignore = ["test_public_checkout.py"]


Cli = Callable[[list[str]], tuple[int, str]]
"""``cli(args)``: ``tolokaforge <args>`` in this process -> (exit status, stdout + stderr)."""


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Cli:
    def run(args: list[str]) -> tuple[int, str]:
        capsys.readouterr()
        with pytest.raises(SystemExit) as done:
            main(args)
        out, err = capsys.readouterr()
        return int(done.value.code or 0), out + err

    return run


ChatAnswer = Callable[[dict[str, Any]], dict[str, Any]]
"""A chat request's body -> the assistant message the fake model answers."""
ChatServer = Callable[[str, ChatAnswer], str]
"""``chat_server(key, answer)`` -> the base URL of a loopback server speaking the OpenAI chat API."""


JudgeReport = Callable[[float, str], dict[str, Any]]
"""``judge_report(score, reasons)`` -> the judge's assistant message for a one-criterion rubric."""


def _judge_report(score: float, reasons: str) -> dict[str, Any]:
    report = {
        "rubric_justification": f"VERDICT: {'MET' if score >= 0.5 else 'NOT MET'}",
        "rubric": score,
        "reasons": reasons,
    }
    call = {
        "id": "j1",
        "type": "function",
        "function": {"name": "submit_report", "arguments": json.dumps(report)},
    }
    return {"role": "assistant", "content": None, "tool_calls": [call]}


@pytest.fixture
def judge_report() -> JudgeReport:
    """How the judge answers a rubric of one criterion (id ``rubric``, as the legacy shape makes)."""
    return _judge_report


@pytest.fixture
def chat_server() -> Iterator[ChatServer]:
    """Real HTTP servers on loopback for the models a pack asks for (the judge, an LLM user): the one
    edge that cannot run here. A request without the key is 401; any path but chat completions, 404."""
    servers: list[ThreadingHTTPServer] = []

    def start(key: str, answer: ChatAnswer) -> str:
        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                if self.headers.get("Authorization") != f"Bearer {key}":
                    self.send_error(401)
                    return
                if self.path != "/v1/chat/completions":
                    self.send_error(404)
                    return
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                reply = {
                    "id": "cmpl",
                    "object": "chat.completion",
                    "choices": [{"index": 0, "message": answer(body), "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 100, "completion_tokens": 20},
                }
                data = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                return

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        servers.append(server)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{server.server_address[1]}/v1"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()
