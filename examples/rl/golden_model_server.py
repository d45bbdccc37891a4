"""A local stand-in for a model: an OpenAI chat-completions server that answers with a pack's golden play.

It recognises the task by the conversation's first user message (each task's ``initial_user_message``)
and answers the n-th assistant turn with the task's n-th golden action as a tool call, then with the
task's golden response as plain text. ``skip_actions=True`` answers with the golden response at once:
a wrong play, for rewards below 1. It runs in a thread on loopback (port 0: a free port), so a rollout
loop on the caller's event loop reaches it over real HTTP, as it would reach vLLM or an API.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Generator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tolokaforge.core.models import GoldenAction
from tolokaforge.host import load_pack
from tolokaforge.host.agents.golden import resolve_tool_name

__all__ = ["GoldenPlay", "golden_model_server"]


class GoldenPlay:
    """Each task's golden actions and response, keyed by its first user message."""

    def __init__(self, pack: Path, *, skip_actions: bool = False) -> None:
        self.skip_actions = skip_actions
        self._tasks: dict[str, tuple[list[GoldenAction], str]] = {}
        for loaded in load_pack(pack).tasks:
            task = loaded.task
            checks = task.grading.state_checks
            actions = list(checks.golden_actions) if checks is not None else []
            play = (actions, task.golden_response or "Done.")
            # Tasks may open alike (the trace_* variants of write_* tasks); then their golden play is alike too.
            if self._tasks.setdefault(task.initial_user_message, play) != play:
                raise ValueError(f"{task.task_id} opens like another task but plays differently")

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        """The assistant message for one chat request."""
        messages: list[dict[str, Any]] = request["messages"]
        first_user = next(str(m.get("content") or "") for m in messages if m["role"] == "user")
        actions, response = self._tasks[first_user]
        turn = sum(1 for m in messages if m["role"] == "assistant")
        if self.skip_actions or turn >= len(actions):
            return {"role": "assistant", "content": response}
        action = actions[turn]
        tools: list[dict[str, Any]] = request.get("tools") or []
        offered = [str(tool["function"]["name"]) for tool in tools]
        call = {
            "id": f"golden-{turn + 1}",
            "type": "function",
            "function": {
                "name": resolve_tool_name(action.tool_name, offered),
                "arguments": json.dumps(action.arguments),
            },
        }
        return {"role": "assistant", "content": None, "tool_calls": [call]}


def _completion(model: str, message: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "chatcmpl-golden",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


@contextmanager
def golden_model_server(pack: Path, *, skip_actions: bool = False) -> Generator[str]:
    """Serve the pack's golden play on loopback; yields the base URL (``http://127.0.0.1:<port>/v1``)."""
    play = GoldenPlay(pack, skip_actions=skip_actions)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            if self.path.rstrip("/") != "/v1/chat/completions":
                self.send_error(404)
                return
            request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            body = json.dumps(_completion(str(request.get("model")), play.answer(request))).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: a rollout makes hundreds of requests."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, name="golden-model-server", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
