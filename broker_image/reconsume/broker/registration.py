"""Registering the broker with its name servers (RocketMQ's ``BrokerOuterAPI.registerBrokerAll``).

Every ``register_interval_s``, and right after the topic table changes, the broker sends
REGISTER_BROKER with a ``RegisterBrokerBody`` (its whole topic table and the table's data
version) to every name server at once. On stop it sends UNREGISTER_BROKER. A name server that
does not answer is logged and tried again at the next round; it never delays the others. Until
one registration has succeeded (a broker usually starts before its name servers can be reached
on Kubernetes) the rounds come sooner: after 1 s, 2 s, 4 s ... up to the interval, so the broker
turns ready soon after a name server does.

As RocketMQ's ``registerIncrementBrokerData`` does, an admin's topic change is answered only once
that registration is over (:meth:`Registrar.registered`), so a client that creates a topic and
then asks a name server for its route finds it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import zlib
from collections.abc import Callable
from typing import Any

from reconsume.engine.delivery import next_backoff
from reconsume.errors import RemotingError
from reconsume.wire.codes import RequestCode, ResponseCode
from reconsume.wire.command import RemotingCommand
from reconsume.wire.dispatcher import Dispatcher
from reconsume.wire.endpoints import RemotingClient
from reconsume.wire.headers import (
    EPOCH_FIELD,
    STABLE_ADDRESS_FIELD,
    RegisterBrokerRequestHeader,
    UnregisterBrokerRequestHeader,
)

log = logging.getLogger(__name__)

REQUEST_TIMEOUT_S = 3.0
REGISTERED_WAIT_S = 2.0
"""At most this long an admin's topic change waits for its registration: below the 3 s a
RocketMQ admin client waits for the answer, so a dead name server slows the answer down but
never turns it into a client-side timeout."""
FIRST_RETRY_S = 1.0
"""Seconds before the second round when the first registered nowhere (doubling after that)."""


class Registrar:
    """Keeps one broker registered with every name server."""

    def __init__(
        self,
        *,
        namesrv_addresses: tuple[str, ...],
        broker_name: str,
        broker_addr: str,
        cluster_name: str,
        broker_id: int,
        interval_s: float,
        topic_wrapper: Callable[[], dict[str, Any]],
    ) -> None:
        self.namesrv_addresses = namesrv_addresses
        self.broker_name = broker_name
        self.broker_addr = broker_addr
        self.cluster_name = cluster_name
        self.broker_id = broker_id
        self.stable = False
        """Whether ``broker_addr`` is the broker name's stable address (a master Service):
        it outlives this broker's connections to the name servers."""
        self.epoch = 0
        """The master's epoch when failover runs (0: none); the name server refuses a
        master's registration older than one it has seen for this broker name."""
        self.interval_s = interval_s
        self._topic_wrapper = topic_wrapper
        self._client = RemotingClient(Dispatcher("broker-registration"))
        self._changed = asyncio.Event()
        self._changes = 0
        """Topic table changes so far."""
        self._covered = 0
        """Changes the last finished round registered (``_changes`` when it began)."""
        self._round_over: asyncio.Event = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.registrations = 0
        """Successful REGISTER_BROKER answers so far (all name servers together)."""
        self.results: dict[str, list[int]] = {address: [0, 0] for address in namesrv_addresses}
        self.last_refusal: str | None = None
        """The last refused registration: the name server, its code and remark."""
        """Per name server: [successful, failed] REGISTER_BROKER requests so far."""

    def start(self) -> None:
        if self.namesrv_addresses and self._task is None:
            self._task = asyncio.create_task(self._run(), name="broker-registration")

    def topics_changed(self) -> None:
        """Register again now (the topic table changed)."""
        self._changes += 1
        self._changed.set()

    async def registered(self) -> None:
        """Return once a round that began after every change so far has finished (whether
        each name server took it or not), or after ``REGISTERED_WAIT_S``; at once when not
        registering."""
        if self._task is None or self._task.done():
            return
        wanted = self._changes
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(REGISTERED_WAIT_S):
                while self._covered < wanted:
                    await self._round_over.wait()

    async def _run(self) -> None:
        retry_s = FIRST_RETRY_S
        while True:
            self._changed.clear()
            changes = self._changes  # the body built next covers these
            try:
                await self.register_all()
            finally:
                self._covered = changes
                self._round_over.set()
                self._round_over = asyncio.Event()
            wait_s = self.interval_s
            if self.registrations:
                retry_s = FIRST_RETRY_S
            else:
                wait_s = min(retry_s, self.interval_s)
                retry_s = next_backoff(retry_s, self.interval_s)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait_s):
                    await self._changed.wait()

    def body(self) -> bytes:
        """RocketMQ's ``RegisterBrokerBody`` as JSON."""
        document = {"topicConfigSerializeWrapper": self._topic_wrapper(), "filterServerList": []}
        return json.dumps(document).encode()

    async def register_all(self) -> None:
        body = self.body()
        header = RegisterBrokerRequestHeader(
            broker_name=self.broker_name,
            broker_addr=self.broker_addr,
            cluster_name=self.cluster_name,
            ha_server_addr="",
            broker_id=self.broker_id,
            compressed=False,
            body_crc32=zlib.crc32(body) & 0x7FFFFFFF,
        )
        ext = header.to_ext_fields()
        if self.epoch:
            ext[EPOCH_FIELD] = str(self.epoch)
        if self.stable:
            ext[STABLE_ADDRESS_FIELD] = "true"
        await asyncio.gather(
            *(
                self._invoke(addr, RequestCode.REGISTER_BROKER, ext, body)
                for addr in self.namesrv_addresses
            )
        )

    async def unregister_all(self) -> None:
        header = UnregisterBrokerRequestHeader(
            broker_name=self.broker_name,
            broker_addr=self.broker_addr,
            cluster_name=self.cluster_name,
            broker_id=self.broker_id,
        )
        ext = header.to_ext_fields()
        if self.epoch:
            ext[EPOCH_FIELD] = str(self.epoch)  # a newer master's registration stays
        await asyncio.gather(
            *(
                self._invoke(addr, RequestCode.UNREGISTER_BROKER, ext, b"")
                for addr in self.namesrv_addresses
            )
        )

    async def _invoke(self, address: str, code: int, ext: dict[str, str], body: bytes) -> None:
        request = RemotingCommand.request(code, dict(ext), body)
        registering = code == RequestCode.REGISTER_BROKER
        try:
            response = await self._client.invoke(address, request, REQUEST_TIMEOUT_S)
        except RemotingError as exc:
            log.warning("name server %s: %s failed: %s", address, RequestCode(code).name, exc)
            if registering:
                self.results[address][1] += 1
            return
        if response.code != ResponseCode.SUCCESS:
            if registering:
                self.results[address][1] += 1
                self.last_refusal = f"{address} answered {response.code} {response.remark}"
            log.warning(
                "name server %s refused %s: code %d %s",
                address,
                RequestCode(code).name,
                response.code,
                response.remark,
            )
        elif registering:
            self.registrations += 1
            self.results[address][0] += 1

    async def close(self) -> None:
        """Stop registering, unregister from every name server and close the connections."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self.namesrv_addresses:
            await self.unregister_all()
        await self._client.close()
