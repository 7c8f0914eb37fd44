"""The tests' polling helpers (tests/polling.py): every wait in the suite relies on them to
return the first truthy value, to fail with what was awaited and the state at the deadline, and
never to turn a probe's exception into a retry."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from tests.polling import eventually, eventually_async


def test_eventually_returns_the_first_truthy_value() -> None:
    answers: Iterator[object] = iter([None, [], 0, {"ready": True}, {"later": True}])
    assert eventually(lambda: next(answers), 5, interval_s=0.001) == {"ready": True}


def test_eventually_fails_naming_what_and_the_timeout_with_the_detail_at_the_deadline() -> None:
    rounds: list[int] = []

    def detail() -> str:
        return f"after {len(rounds)} rounds"

    with pytest.raises(AssertionError) as failure:
        eventually(lambda: rounds.append(1), 0.05, "the queue drained", detail=detail)
    assert (
        str(failure.value)
        == f"the queue drained: not reached within 0.05 s\nafter {len(rounds)} rounds"
    )
    assert len(rounds) >= 2


def test_a_probe_exception_and_a_failed_check_end_the_wait_at_once() -> None:
    def broken() -> bool:
        raise ConnectionRefusedError("no server")

    with pytest.raises(ConnectionRefusedError):
        eventually(broken, 30)

    def exited() -> None:
        raise AssertionError("the process exited with 1")

    with pytest.raises(AssertionError, match="exited with 1"):
        eventually(lambda: False, 30, check=exited)


def test_eventually_async_takes_plain_and_async_probes() -> None:
    async def scenario() -> tuple[int, str]:
        count = 0

        def plain() -> int:
            nonlocal count
            count += 1
            return count if count == 3 else 0

        async def awaited() -> str | None:
            await asyncio.sleep(0)
            return "routed" if count >= 3 else None

        return (
            await eventually_async(plain, 5, interval_s=0.001),
            await eventually_async(awaited, 5, interval_s=0.001),
        )

    assert asyncio.run(scenario()) == (3, "routed")


def test_eventually_async_fails_and_propagates_like_eventually() -> None:
    async def never() -> bool:
        return False

    async def broken() -> bool:
        raise KeyError("status")

    with pytest.raises(AssertionError, match=r"^route of orders: not reached within 0.05 s$"):
        asyncio.run(eventually_async(never, 0.05, "route of orders"))
    with pytest.raises(KeyError):
        asyncio.run(eventually_async(broken))
