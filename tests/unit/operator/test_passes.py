"""One pass at a time per object: a second pass on the object waits for the first, other
objects do not, and no lock outlives its passes."""

from __future__ import annotations

import asyncio
from typing import Any

from reconsume_operator.passes import ObjectLocks, deleting, object_key


def body(uid: str, **meta: Any) -> dict[str, Any]:
    return {"metadata": {"uid": uid, "name": "orders", "namespace": "shop", **meta}}


async def record(
    locks: ObjectLocks, obj: dict[str, Any], name: str, log: list[str], release: asyncio.Event
) -> None:
    async with locks.hold(obj):
        log.append(f"{name} in")
        await release.wait()
        log.append(f"{name} out")


def test_a_second_pass_on_the_object_waits_for_the_first() -> None:
    async def go() -> list[str]:
        locks, log = ObjectLocks(), []
        first_done, second_done = asyncio.Event(), asyncio.Event()
        first = asyncio.create_task(record(locks, body("u1"), "drift", log, first_done))
        await asyncio.sleep(0)
        second = asyncio.create_task(record(locks, body("u1"), "delete", log, second_done))
        for _ in range(5):
            await asyncio.sleep(0)
        assert log == ["drift in"]
        second_done.set()
        first_done.set()
        await asyncio.gather(first, second)
        assert len(locks) == 0
        return log

    assert asyncio.run(go()) == ["drift in", "drift out", "delete in", "delete out"]


def test_other_objects_do_not_wait() -> None:
    async def go() -> list[str]:
        locks, log = ObjectLocks(), []
        held = asyncio.Event()
        first = asyncio.create_task(record(locks, body("u1"), "a", log, held))
        await asyncio.sleep(0)
        async with locks.hold(body("u2")):
            log.append("b in")
        assert len(locks) == 1
        held.set()
        await first
        return log

    assert asyncio.run(go()) == ["a in", "b in", "a out"]


def test_a_failing_pass_releases_the_object() -> None:
    async def go() -> int:
        locks = ObjectLocks()
        try:
            async with locks.hold(body("u1")):
                raise RuntimeError("broker unreachable")
        except RuntimeError:
            pass
        async with locks.hold(body("u1")):
            return len(locks)

    assert asyncio.run(go()) == 1


def test_keys_and_deletion() -> None:
    assert object_key(body("u1")) == "u1"
    assert object_key({"metadata": {"name": "orders", "namespace": "shop"}}) == "shop/orders"
    assert not deleting(body("u1"))
    assert deleting(body("u1", deletionTimestamp="2026-01-01T00:00:00Z"))
