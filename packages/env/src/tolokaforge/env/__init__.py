"""Every task pack as a reinforcement-learning environment (docs/rl.md).

``Environments.open(pack)`` loads a pack and opens its runner; ``envs.env()`` is one gym-style
environment (``reset``, ``step``, ``reward``, ``close``); :func:`rollouts` runs many episodes against a
policy callback; :class:`GymEnv` is the synchronous gymnasium wrapper. The host never imports this package.
"""

from __future__ import annotations

from .environments import Environments
from .episode import Env, LocalEnv, assistant_turn
from .gym_env import GymEnv
from .rollouts import EpisodeKey, Policy, current_episode, golden_call, golden_policy, rollouts
from .shapes import EpisodeResult, Observation, Reward, StepInfo

__all__ = [
    "Env",
    "Environments",
    "EpisodeKey",
    "EpisodeResult",
    "GymEnv",
    "LocalEnv",
    "Observation",
    "Policy",
    "Reward",
    "StepInfo",
    "assistant_turn",
    "current_episode",
    "golden_call",
    "golden_policy",
    "rollouts",
]
