"""Entry point: serve the exec provider on a loopback port and announce it with the handshake line."""

from __future__ import annotations

from tolokaforge.core.providers import PROVIDER_PROTOCOL_VERSION, run_provider

from .service import ExecProvider

__all__ = ["main"]


def main() -> None:
    run_provider(ExecProvider(PROVIDER_PROTOCOL_VERSION))


if __name__ == "__main__":
    main()
