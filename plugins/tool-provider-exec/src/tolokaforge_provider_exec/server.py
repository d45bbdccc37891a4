"""Entry point: serve the exec provider on a loopback port and announce it with the handshake line."""

from __future__ import annotations

from tolokaforge.sdk.providers import PROVIDER_PROTOCOL_VERSION, run_provider

from .service import ExecProvider
from .shell import hide_from_commands

__all__ = ["main"]


def main() -> None:
    hide_from_commands()
    provider = ExecProvider(PROVIDER_PROTOCOL_VERSION)
    try:
        run_provider(provider)
    finally:
        # Stopped (SIGTERM) or failed: the trials' shells and everything they started go with it.
        provider.shells.kill_all_now()


if __name__ == "__main__":
    main()
