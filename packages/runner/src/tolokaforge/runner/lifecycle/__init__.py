"""Trials from registration to cleanup: the registry, its leases, released grades."""
