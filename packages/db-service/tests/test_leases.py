"""Ownership of trials: a live lease keeps a trial its owner's; an expired one makes it reclaimable.

Every store, through both clients (the ``client`` fixture), answers the same way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from tolokaforge.db.client import StateClient
from tolokaforge.db.errors import ConflictError, NotFoundError, ValidationFailedError

TABLES = {"accounts": [{"id": "A-1", "balance": 1}]}
LEASE = 0.6


async def test_live_lease_refuses_others_and_expired_lease_is_reclaimed(
    client: StateClient, new_trial_id: Callable[[], str]
) -> None:
    trial = new_trial_id()
    await client.init_trial(trial, TABLES, owner="runner-a", lease_seconds=LEASE)
    await client.patch(trial, [{"table_name": "accounts", "operations": [{"op": "delete", "index": 0}]}])
    with pytest.raises(ConflictError, match="runner-a"):
        await client.init_trial(trial, TABLES, owner="runner-b", lease_seconds=LEASE)
    with pytest.raises(ConflictError):
        await client.delete_trial(trial, owner="runner-b")
    assert (await client.get_state(trial)).tables == {"accounts": []}  # untouched by b's attempts
    await asyncio.sleep(LEASE + 0.2)
    # runner-a stopped renewing (killed): b reclaims the id with a fresh trial at version 0
    hashes = await client.init_trial(trial, TABLES, owner="runner-b", lease_seconds=30)
    assert hashes.version == 0
    assert (await client.get_state(trial)).tables == TABLES
    with pytest.raises(ConflictError):
        await client.delete_trial(trial, owner="runner-a")
    await client.delete_trial(trial, owner="runner-b")
    with pytest.raises(NotFoundError):
        await client.get_hashes(trial)


async def test_renewal_keeps_the_lease_and_counts_the_owners_trials(
    client: StateClient, new_trial_id: Callable[[], str]
) -> None:
    owner = "runner-" + new_trial_id().replace(":", "-")
    trials = [new_trial_id() for _ in range(3)]
    for trial in trials:
        await client.init_trial(trial, TABLES, owner=owner, lease_seconds=LEASE)
    for _ in range(3):
        await asyncio.sleep(LEASE / 2)
        assert await client.renew_lease(owner) == 3
    with pytest.raises(ConflictError):
        await client.init_trial(trials[0], TABLES, owner="other", lease_seconds=LEASE)
    assert await client.renew_lease("nobody-holds-this") == 0
    for trial in trials:
        await client.delete_trial(trial, owner=owner)


async def test_unowned_trials_are_never_reclaimed_but_any_owner_may_delete_them(
    client: StateClient, new_trial_id: Callable[[], str]
) -> None:
    trial = new_trial_id()
    await client.init_trial(trial, TABLES)
    with pytest.raises(ConflictError):
        await client.init_trial(trial, TABLES, owner="runner-b", lease_seconds=LEASE)
    await client.delete_trial(trial, owner="runner-b")
    with pytest.raises(NotFoundError):
        await client.delete_trial(trial)


async def test_owner_and_lease_come_together_and_are_checked(
    client: StateClient, new_trial_id: Callable[[], str]
) -> None:
    trial = new_trial_id()
    with pytest.raises(ValidationFailedError):
        await client.init_trial(trial, TABLES, owner="runner-a")
    with pytest.raises(ValidationFailedError):
        await client.init_trial(trial, TABLES, owner="no spaces", lease_seconds=1)
    with pytest.raises(ValidationFailedError):
        await client.init_trial(trial, TABLES, owner="runner-a", lease_seconds=0)
    with pytest.raises(ValidationFailedError):
        await client.renew_lease("../x")
