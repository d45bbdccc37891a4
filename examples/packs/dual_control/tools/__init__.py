"""Beacon Mobile tools: the agent's account tools and the customer's phone tools (dual control).

Both kinds live in ``TOOLS``; each task's ``tools.agent.enabled`` and ``tools.user.enabled`` pick which
side may call which. ``side`` on each class says whose tool it is, ``category`` whether it writes.
"""

from __future__ import annotations

from ._agent import EnableRoaming, GetLineDetails, GetNetworkStatus, PurchaseDataAddon, SwapSim, VerifyPin
from ._user import CheckDataUsage, CheckStatusBar, RestartDevice, ToggleAirplaneMode, ToggleDataRoaming

__all__ = ["TOOLS"]

TOOLS = [
    GetLineDetails,
    GetNetworkStatus,
    EnableRoaming,
    PurchaseDataAddon,
    VerifyPin,
    SwapSim,
    CheckStatusBar,
    CheckDataUsage,
    ToggleAirplaneMode,
    ToggleDataRoaming,
    RestartDevice,
]
