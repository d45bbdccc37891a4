"""The runner's gRPC adapter: the servicer over the domain runner, its guard, codecs and server."""
