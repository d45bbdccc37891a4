"""A verifiers ``MultiTurnEnv`` over :mod:`tolokaforge.env`: each model turn is one env step, the reward
is the runner's grade.

verifiers owns the rollout loop and the model calls (its client speaks to any OpenAI-compatible
server); this class only answers its hooks. ``setup_state`` resets a trial for the row's task (the
dataset row carries just the task id and seed: the real prompt and tools come from the reset),
``env_response`` steps the trial with the model's message and hands back the tool results or the
simulated user's answer, and a cleanup handler takes the grade before the trial is released, since
verifiers runs cleanups before its rubric scores. The rubric then reads that grade: reward = the
grade's value, with ``passed`` as a zero-weight metric.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import verifiers as vf  # pyright: ignore[reportMissingTypeStubs]
from datasets import Dataset  # pyright: ignore[reportMissingTypeStubs]
from verifiers.types import Messages, State  # pyright: ignore[reportMissingTypeStubs]
from verifiers.utils.message_utils import normalize_messages  # pyright: ignore[reportMissingTypeStubs]

from tolokaforge.env import Env, Environments

from .chat import function_parts, text_of, tool_call

__all__ = ["TolokaforgeEnv", "grade_of", "load_environment"]

# State keys this adapter adds (verifiers' State is a dict that also carries its own keys).
_ENV = "tolokaforge_env"
_GRADE = "tolokaforge_grade"


def grade_of(state: State) -> dict[str, Any]:
    """The runner's grade a finished rollout's state carries: value, passed, components, reasons."""
    grade = state.get(_GRADE)
    if not isinstance(grade, dict):
        raise KeyError("this rollout has no tolokaforge grade (it failed before its trial was reset)")
    return cast(dict[str, Any], grade)


async def _reward(state: State) -> float:
    grade = state.get(_GRADE)
    return float(cast(dict[str, Any], grade)["value"]) if isinstance(grade, dict) else 0.0


async def _passed(state: State) -> float:
    grade = state.get(_GRADE)
    return 1.0 if isinstance(grade, dict) and cast(dict[str, Any], grade)["passed"] else 0.0


# verifiers names a rubric's columns after its functions.
_reward.__name__ = "tolokaforge_reward"
_passed.__name__ = "tolokaforge_passed"


def _openai_message(message: Any) -> dict[str, Any]:
    """verifiers' assistant message (flat tool calls) as an OpenAI chat assistant message."""
    calls = cast(list[Any], getattr(message, "tool_calls", None) or [])
    out: dict[str, Any] = {"role": "assistant", "content": text_of(getattr(message, "content", None))}
    if calls:
        out["tool_calls"] = [tool_call(str(call.id), str(call.name), str(call.arguments)) for call in calls]
    return out


def _vf_tool(schema: dict[str, Any]) -> vf.Tool:
    name, description, parameters = function_parts(schema)
    return vf.Tool(name=name, description=description, parameters=parameters)


class TolokaforgeEnv(vf.MultiTurnEnv):
    """Every task of an open :class:`Environments` as a verifiers environment (one row per task)."""

    def __init__(
        self, envs: Environments, task_ids: Sequence[str] | None = None, *, seed: int = 0, **kwargs: Any
    ) -> None:
        task_ids = list(task_ids) if task_ids is not None else envs.task_ids
        if not task_ids:
            raise ValueError("no tasks: the pack has none, or task_ids is empty")
        self.envs = envs
        rows: list[dict[str, Any]] = [
            {
                # A stand-in: setup_state puts the trial's own system prompt and first message here.
                "prompt": [{"role": "user", "content": task_id}],
                "info": {"task_id": task_id, "seed": seed},
            }
            for task_id in task_ids
        ]
        rubric = vf.Rubric(funcs=[_reward, _passed], weights=[1.0, 0.0])
        dataset = Dataset.from_list(rows)  # pyright: ignore[reportUnknownMemberType]
        super().__init__(eval_dataset=dataset, rubric=rubric, **kwargs)  # pyright: ignore[reportUnknownMemberType]

    async def setup_state(self, state: State) -> State:
        info = cast(dict[str, Any], state["info"])
        env = self.envs.env()
        state[_ENV] = env
        observation = await env.reset(str(info["task_id"]), seed=int(info["seed"]))
        state["prompt"] = normalize_messages(observation.messages, field_name="observation.messages")
        state["tool_defs"] = [_vf_tool(schema) for schema in observation.tools]
        await super().setup_state(state)
        return state

    async def env_response(self, messages: Messages, state: State, **kwargs: Any) -> Messages:
        env = cast(Env, state[_ENV])
        observation, done, _info = await env.step(_openai_message(messages[-1]))
        answer = normalize_messages(observation.messages, field_name="observation.messages")
        if done:
            # verifiers stops on a final env response; the trial ended at this step.
            state["final_env_response"] = answer
        return answer

    @vf.cleanup
    async def grade_and_release(self, state: State) -> None:
        env = cast("Env | None", state.get(_ENV))
        if env is None:
            return
        state[_ENV] = None
        try:
            if env.done:
                reward = await env.reward()
                grade: dict[str, Any] = {
                    "value": reward.value,
                    "passed": reward.passed,
                    "components": dict(reward.components),
                    "reasons": list(reward.reasons),
                }
            else:
                # verifiers stopped first (its own turn cap, a timeout, a model error): no grade.
                why = (
                    f"verifiers stopped the rollout ({state.get('stop_condition')}) before the episode ended"
                )
                grade = {"value": 0.0, "passed": False, "components": {}, "reasons": [why]}
            state[_GRADE] = grade
        finally:
            await env.close()


def load_environment(
    envs: Environments, task_ids: Sequence[str] | None = None, *, seed: int = 0, **kwargs: Any
) -> TolokaforgeEnv:
    """verifiers' entry point convention: the environment for ``task_ids`` (default: every task) of ``envs``."""
    return TolokaforgeEnv(envs, task_ids, seed=seed, **kwargs)
