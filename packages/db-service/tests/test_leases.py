"""Ownership of trials: a live lease keeps a trial its owner's; an expired one makes it reclaimable.

Every store, through both clients (the ``client`` fixture), answers the same way. A renewal may name
the trials to renew: then the owner's other trials are left to run out (docs/faults.md).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import aiohttp
import pytest

from tolokaforge.core.credentials import bearer, new_token
from tolokaforge.db.app import create_app
from tolokaforge.db.client import LeaseRenewal, StateClient
from tolokaforge.db.errors import ConflictError, NotFoundError, ValidationFailedError
from tolokaforge.db.memory import MemoryStore
from tolokaforge.db.server import serve_app
from tolokaforge.db.settings import Settings

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
        assert await client.renew_lease(owner) == LeaseRenewal(3)
    with pytest.raises(ConflictError):
        await client.init_trial(trials[0], TABLES, owner="other", lease_seconds=LEASE)
    assert await client.renew_lease("nobody-holds-this") == LeaseRenewal(0)
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


async def test_a_named_renewal_renews_only_the_named_trials_the_owner_holds(
    client: StateClient, new_trial_id: Callable[[], str]
) -> None:
    owner = "runner-" + new_trial_id().replace(":", "-")
    kept, dropped = new_trial_id(), new_trial_id()
    anothers, unowned, absent = new_trial_id(), new_trial_id(), new_trial_id()
    for trial in (kept, dropped):
        await client.init_trial(trial, TABLES, owner=owner, lease_seconds=LEASE)
    await client.init_trial(anothers, TABLES, owner="runner-b", lease_seconds=30)
    await client.init_trial(unowned, TABLES)
    named = [kept, anothers, unowned, absent, kept]  # a repeated id counts once
    # ``dropped`` is never named: however often its owner renews, its lease runs out
    loop = asyncio.get_running_loop()
    until = loop.time() + LEASE + 0.2
    while True:
        renewal = await client.renew_lease(owner, named)
        assert renewal == LeaseRenewal(1, (anothers, unowned, absent))
        if loop.time() >= until:
            break
        await asyncio.sleep(LEASE / 3)
    with pytest.raises(ConflictError, match=owner):  # renewed a moment ago: still the owner's
        await client.init_trial(kept, TABLES, owner="runner-c", lease_seconds=LEASE)
    reclaimed = await client.init_trial(dropped, TABLES, owner="runner-c", lease_seconds=30)
    assert reclaimed.version == 0
    # nobody else's trial was touched: another owner's lease lives on, the unowned trial has none
    with pytest.raises(ConflictError, match="runner-b"):
        await client.delete_trial(anothers, owner=owner)
    assert await client.renew_lease(owner, [dropped]) == LeaseRenewal(0, (dropped,))  # runner-c's now
    assert await client.renew_lease(owner, []) == LeaseRenewal(0)
    for trial, holder in ((kept, owner), (dropped, "runner-c"), (anothers, "runner-b"), (unowned, None)):
        await client.delete_trial(trial, owner=holder)


async def test_a_named_renewal_checks_its_ids(client: StateClient, new_trial_id: Callable[[], str]) -> None:
    with pytest.raises(ValidationFailedError):
        await client.renew_lease("runner-a", ["../x"])
    with pytest.raises(ValidationFailedError):
        await client.renew_lease("runner-a", [new_trial_id() for _ in range(10_001)])
    with pytest.raises(ValidationFailedError):
        await client.renew_lease("no spaces", [new_trial_id()])
    ids = [new_trial_id() for _ in range(10_000)]
    assert await client.renew_lease("runner-a", ids) == LeaseRenewal(0, tuple(ids))


async def test_the_lease_body_is_optional_and_a_present_one_must_be_a_lease_request() -> None:
    token = new_token()
    app = create_app(Settings(token=token), store=MemoryStore())
    async with (
        serve_app(app) as base_url,
        aiohttp.ClientSession(headers={"Authorization": bearer(token)}) as session,
    ):

        async def renew(data: bytes | None) -> tuple[int, dict[str, object]]:
            async with session.post(f"{base_url}/owners/runner-a/lease", data=data) as response:
                return response.status, json.loads(await response.read())

        assert await renew(None) == (200, {"owner": "runner-a", "trials": 0})
        assert await renew(b'{"trial_ids": []}') == (
            200,
            {"owner": "runner-a", "trials": 0, "not_renewed": []},
        )
        for body, status in ((b"null", 422), (b"{}", 422), (b'{"trial_ids": [], "x": 1}', 422), (b"{", 400)):
            answered, error = await renew(body)
            assert answered == status and set(error) == {"error", "message", "details"}, body
