"""Entry point: serve the fs provider on a loopback port and announce it with the handshake line."""

from __future__ import annotations

from tolokaforge.sdk.providers import PROVIDER_PROTOCOL_VERSION, run_provider

from .service import FsProvider

__all__ = ["main"]


def main() -> None:
    run_provider(FsProvider(PROVIDER_PROTOCOL_VERSION))


if __name__ == "__main__":
    main()
