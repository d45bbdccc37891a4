"""A synchronous ``gymnasium.Env`` over one environment, for trainers written against gymnasium.

Observations and actions are text, as gymnasium's ``Text`` spaces hold them: an observation is the new
chat messages as a JSON list (ASCII-escaped, so every character is printable); an action is an
assistant message as a JSON object, or plain text (the assistant's words, no tool calls). A dict action
is taken as is too. The reward is the grade's score on the step that ends the episode, 0.0 before it;
``max_turns`` truncates, every other ending terminates. The async environments run on an event loop
of this object's own thread.
"""

from __future__ import annotations

import asyncio
import json
import string
import threading
from collections.abc import Coroutine, Mapping
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, TypeVar, cast

import gymnasium
from gymnasium import spaces

from .environments import Environments
from .episode import Env
from .shapes import Observation

__all__ = ["GymEnv"]

_T = TypeVar("_T")
_CHARSET = frozenset(string.printable)
MAX_OBSERVATION_CHARS = 4_000_000
MAX_ACTION_CHARS = 4_096


class GymEnv(gymnasium.Env[str, str]):
    """``GymEnv(pack, **open_options)``; ``reset(seed=, options={"task_id": ...})``, ``step(action)``.

    Without a ``task_id`` option, ``reset`` picks a task with the seeded generator (the same seed, the
    same task). ``open_options`` are :meth:`Environments.open`'s.
    """

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 - gymnasium's own class attribute

    def __init__(self, pack: str | Path, **open_options: Any) -> None:
        super().__init__()
        self.observation_space = spaces.Text(MAX_OBSERVATION_CHARS, min_length=0, charset=_CHARSET)
        self.action_space = spaces.Text(MAX_ACTION_CHARS, min_length=0, charset=_CHARSET)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="tolokaforge-gym", daemon=True)
        self._thread.start()
        self._opened: AbstractAsyncContextManager[Environments] = Environments.open(pack, **open_options)
        try:
            self.envs: Environments = self._run(self._opened.__aenter__())
        except BaseException:
            self._stop()
            raise
        self._env: Env = self.envs.env()
        self._closed = False

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        task_ids = self.envs.task_ids
        task_id = (options or {}).get("task_id")
        if not isinstance(task_id, str):
            task_id = task_ids[int(self.np_random.integers(len(task_ids)))]
        trial_seed = seed if seed is not None else int(self.np_random.integers(2**31))
        observation = self._run(self._env.reset(task_id, trial_seed))
        # The trial id is the reset's alone: a step's info is the same for the same seed and action.
        return _text(observation), {**self._info(observation), "trial_id": self._env.trial_id}

    def step(self, action: str | Mapping[str, Any]) -> tuple[str, float, bool, bool, dict[str, Any]]:
        observation, done, info = self._run(self._env.step(_message(action)))
        reward = 0.0
        details = self._info(observation)
        details.update(
            {"turn": info.turn, "termination": info.termination, "tool_statuses": list(info.tool_statuses)}
        )
        if done:
            graded = self._run(self._env.reward())
            reward = graded.value
            details.update(
                {
                    "passed": graded.passed,
                    "components": dict(graded.components),
                    "reasons": list(graded.reasons),
                }
            )
        truncated = done and info.termination == "max_turns"
        return _text(observation), reward, done and not truncated, truncated, details

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._run(self._env.close())
            self._run(self._opened.__aexit__(None, None, None))
        finally:
            self._stop()

    def _info(self, observation: Observation) -> dict[str, Any]:
        return {
            "task_id": self._env.task_id,
            "system_prompt": observation.system_prompt,
            "tools": json.loads(json.dumps(observation.tools)),
        }

    def _run(self, coroutine: Coroutine[Any, Any, _T]) -> _T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def _stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()


def _text(observation: Observation) -> str:
    return json.dumps(observation.messages, ensure_ascii=True)


def _message(action: str | Mapping[str, Any]) -> dict[str, Any]:
    """An action as an assistant message: a JSON object as given, any other text as the assistant's words."""
    if isinstance(action, Mapping):
        return dict(action)
    try:
        parsed = json.loads(action)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        return cast(dict[str, Any], parsed)
    return {"role": "assistant", "content": action}
