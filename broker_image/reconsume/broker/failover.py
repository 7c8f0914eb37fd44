"""Failover: the election's result applied to the broker, every renewal interval.

Each step reads (and, as master, renews) the lease (:class:`~reconsume.broker.election.Elector`)
and makes the broker what it says: the master (its epoch the lease's), or a replica of the
address the lease names. The store's :attr:`~reconsume.store.MessageStore.writable_until` follows
every successful renewal, so a master that stops renewing (frozen, cut off from the lease's
store) stops appending on its own before any replica may take over, and a master that learns it
was deposed turns replica at once: its log is cut back, in the handshake with the new master,
to what the new master has.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from reconsume.broker.election import Elector, Leadership
from reconsume.store import MessageStore

log = logging.getLogger(__name__)


class Failover:
    def __init__(
        self,
        elector: Elector,
        store: MessageStore,
        become: Callable[[Leadership], Awaitable[None]],
    ) -> None:
        self.elector = elector
        self.store = store
        self._become = become
        self._task: asyncio.Task[None] | None = None
        self.current: Leadership | None = None

    async def first(self) -> Leadership:
        """The first step, before the broker serves: its first role."""
        leadership = await self.elector.step()
        self.current = leadership
        return leadership

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="failover")

    async def _run(self) -> None:
        elector = self.elector
        while True:
            await asyncio.sleep(elector.renew_interval_s)
            leadership = await elector.step()
            if leadership.master:
                self.store.writable_until = elector.valid_until
            if leadership != self.current:
                log.info(
                    "%s in epoch %d (master %s)",
                    "master" if leadership.master else "replica",
                    leadership.epoch,
                    leadership.master_address,
                )
                await self._become(leadership)
                self.current = leadership

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
