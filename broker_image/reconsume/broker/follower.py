"""The replica's side of replication: follow the master's log and metadata.

Each connection starts with a handshake (:mod:`reconsume.broker.replication`): the log is cut
back to where it agrees with the master's, or started over at the master's first offset when
they share no epoch or the master no longer holds where it ends; the master's epoch history is
adopted. Then ``REPLICATE_LOG`` requests follow each other
(:class:`~reconsume.broker.replica_exchange.Exchange`): each asks for the log after what
the replica holds and acknowledges what it has stored (durably under Sync flush, so a Sync
write counts as stored only once it is on this replica's disk). Topic and group configs,
consumer and schedule offsets and the timer's progress are fetched whenever the master's
metadata version moves, at most every ``metadata_interval_s``.

Anything unexpected (the master unreachable or answering with an error, bytes that do not
continue this log, an epoch older than one this replica has seen) ends the connection; the
next one starts with a handshake again after a bounded backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from reconsume.broker.replica_exchange import REQUEST_TIMEOUT_S, Exchange, succeeded
from reconsume.broker.replication import configs_version, parse_history
from reconsume.engine.delivery import next_backoff
from reconsume.engine.timer_progress import progress_path
from reconsume.errors import (
    InvalidArgumentError,
    RemotingError,
    ReplicationError,
    StoreError,
)
from reconsume.message.configs import SubscriptionGroupConfig, TopicConfig
from reconsume.store import MessageStore
from reconsume.store.atomic import write_json
from reconsume.store.replication import Appended
from reconsume.wire.codes import RequestCode
from reconsume.wire.command import RemotingCommand
from reconsume.wire.endpoints import RemotingClient, Signer

log = logging.getLogger(__name__)


@dataclass(slots=True)
class FollowerState:
    """What a replica knows of its master, for metrics and status."""

    master: str | None = None
    connected: bool = False
    master_end: int = 0
    master_epoch: int = 0


class Follower:
    """Keeps ``store`` a replica of the master ``master()`` names (None: no master known)."""

    def __init__(
        self,
        store: MessageStore,
        master: Callable[[], str | None],
        replica_id: str,
        *,
        max_bytes: int = 1 << 20,
        metadata_interval_s: float = 1.0,
        client: RemotingClient | None = None,
        on_appended: Callable[[Appended], None] = lambda _appended: None,
        on_read_limit: Callable[[int | None], None] = lambda _limit: None,
    ) -> None:
        self.store = store
        self._master = master
        self.replica_id = replica_id
        self.max_bytes = max_bytes
        self.metadata_interval_s = metadata_interval_s
        self._client = client or RemotingClient()
        self._on_appended = on_appended
        """Told what each answer appended (long polling wakes the pulls waiting for it)."""
        self._on_read_limit = on_read_limit
        """Told where the master's reads stop (None: nowhere), after each answer: this
        replica's reads stop there too."""
        self.state = FollowerState()
        self._master_changed = asyncio.Event()
        self._metadata_version: str | None = None
        self._metadata_at = 0.0

    def master_changed(self) -> None:
        """Another master was elected: follow it now, whatever the backoff."""
        self._master_changed.set()

    async def run(self) -> None:
        """Follow until cancelled."""
        backoff = 0.05
        while True:
            self._master_changed.clear()
            address = self._master()
            self.state.master = address
            if address is not None:
                try:
                    await self._follow(address)
                except (RemotingError, ReplicationError, InvalidArgumentError, StoreError) as exc:
                    log.warning("replicating from %s: %s; again in %.2fs", address, exc, backoff)
                self.state.connected = False
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(backoff if address is not None else 0.2):
                    await self._master_changed.wait()
            if self._master_changed.is_set():
                backoff = 0.05
            elif address is not None:
                backoff = next_backoff(backoff, 2.0)

    async def close(self) -> None:
        await self._client.close()

    # ------------------------------------------------------------------ one connection
    async def _invoke(self, address: str, request: RemotingCommand) -> RemotingCommand:
        response = await self._client.invoke(address, request, REQUEST_TIMEOUT_S)
        return succeeded(address, response)

    async def _follow(self, address: str) -> None:
        await self._handshake(address)
        connection = await self._client.connection(address)
        exchange = Exchange(self, connection, address)
        self.state.connected = True
        try:
            exchange.ask(self.store.replica.restart_stream())
            await exchange.ended
        finally:
            exchange.close()

    async def _handshake(self, address: str) -> None:
        store = self.store
        hello = {
            "replicaId": self.replica_id,
            "epochs": [[e.epoch, e.start_offset] for e in store.epochs.entries],
            "end": store.commitlog.write_offset,
            "segmentBytes": store.commitlog.segment_bytes,
        }
        request = RemotingCommand.request(
            RequestCode.REPLICA_HANDSHAKE, body=json.dumps(hello).encode()
        )
        response = await self._invoke(address, request)
        try:
            answer = json.loads(response.body)
            history = parse_history(answer["epochs"])
            epoch = int(answer["epoch"])
            min_offset = int(answer["minOffset"])
            agreed = answer["agreed"]
            agreed = None if agreed is None else int(agreed)
        except (ValueError, KeyError, TypeError) as exc:
            raise ReplicationError(f"master {address}: not a handshake answer ({exc})") from exc
        seen = store.epochs.current
        if seen is not None and epoch < seen.epoch:
            raise ReplicationError(
                f"master {address} is in epoch {epoch}; this replica has seen {seen.epoch}"
            )
        end = store.commitlog.write_offset
        if agreed is None or agreed < min_offset:
            if end > store.commitlog.min_offset or store.commitlog.min_offset != min_offset:
                log.warning(
                    "this log [%d, %d) shares nothing with master %s's (from %d): starting over",
                    store.commitlog.min_offset,
                    end,
                    address,
                    min_offset,
                )
                await asyncio.to_thread(store.replica.restart_at, min_offset)
        elif agreed < end:
            log.warning(
                "master %s holds this log only up to %d of %d: the rest is set aside",
                address,
                agreed,
                end,
            )
            await asyncio.to_thread(
                store.replica.truncate, agreed, f"not in the log of master {address}"
            )
        store.epochs.cut(store.commitlog.write_offset)
        store.epochs.follow(history)
        self.state.master_epoch = epoch
        self._metadata_version = None  # fetch again on this connection

    @property
    def signer(self) -> Signer | None:
        return self._client.signer

    def on_appended(self, appended: Appended) -> None:
        self._on_appended(appended)

    def on_read_limit(self, limit: int | None) -> None:
        self._on_read_limit(limit)

    def wants_metadata(self, version: str | None) -> bool:
        """Whether the master's metadata at ``version`` is to be fetched now: at once when its
        topic or group configs changed, else at most every ``metadata_interval_s``."""
        return version != self._metadata_version and (
            configs_version(version) != configs_version(self._metadata_version)
            or time.monotonic() - self._metadata_at >= self.metadata_interval_s
        )

    async def fetch_metadata(self, address: str) -> None:
        self._metadata_at = time.monotonic()
        await self._fetch_metadata(address)

    async def _fetch_metadata(self, address: str) -> None:
        request = RemotingCommand.request(RequestCode.REPLICA_METADATA)
        response = await self._invoke(address, request)
        try:
            document = json.loads(response.body)
            apply_metadata(self.store, document)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ReplicationError(f"master {address}: metadata does not decode ({exc})") from exc
        self._metadata_version = str(document.get("version"))


def apply_metadata(store: MessageStore, document: Mapping[str, Any]) -> None:
    """Make the replica's tables hold the master's."""
    store.topics.replace(
        {name: TopicConfig.from_dict(config) for name, config in document["topics"].items()}
    )
    store.groups.replace(
        {
            name: SubscriptionGroupConfig.from_dict(config)
            for name, config in document["groups"].items()
        }
    )
    for table, key in (
        (store.consumer_offsets, "consumerOffsets"),
        (store.schedule_offsets, "scheduleOffsets"),
    ):
        table.replace(
            {k: {int(q): int(o) for q, o in queues.items()} for k, queues in document[key].items()}
        )
    acked = document.get("ackedOffsets")
    if acked is not None:  # a master of an older version sends none
        store.acked.replace(acked)
    timer = document.get("timerProgress")
    if timer is not None:
        write_json(progress_path(store.root / "config"), timer)
