"""The host's way to a runner: the gRPC client adapter and what it keeps on the wire."""
