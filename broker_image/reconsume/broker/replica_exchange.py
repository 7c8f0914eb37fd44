"""One connection's REPLICATE_LOG requests, on the replica's side (:class:`Exchange`): each
asks for the log after what the replica holds and acknowledges what it has stored; each answer
is checked and applied as the transport reads it. :class:`~reconsume.broker.follower.Follower`
makes one per connection to its master, after the handshake.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Mapping
from typing import TYPE_CHECKING, Any

from reconsume.errors import RemotingTimeoutError, ReplicationError
from reconsume.store import FlushMode
from reconsume.wire.codes import RequestCode, ResponseCode
from reconsume.wire.command import RemotingCommand
from reconsume.wire.transport import Connection

if TYPE_CHECKING:
    from reconsume.broker.follower import Follower

REQUEST_TIMEOUT_S = 5.0
"""Beyond the master's hold time: an answer later than this means the master is stuck."""


class Exchange:
    """The REPLICATE_LOG requests of one connection to the master, each answer handled as the
    transport reads it (the connection's waiter for every request): the next request — the
    acknowledgement a Sync write on the master waits for — leaves as soon as the records are
    in this log, with no task woken in between and no timer per request. A metadata fetch and
    a Sync flush's wait for the disk run in a task of their own meanwhile.

    :attr:`ended` fails with whatever ends the exchange: an answer that does not continue
    this log, an error answer, the connection lost, no answer within ``REQUEST_TIMEOUT_S``."""

    def __init__(self, follower: Follower, connection: Connection, address: str) -> None:
        self._follower = follower
        self._connection = connection
        self._address = address
        self._store = follower.store
        self._sync_flush = follower.store.settings.flush_mode is FlushMode.SYNC
        self._loop = asyncio.get_running_loop()
        self.ended: asyncio.Future[None] = self._loop.create_future()
        self._offset = 0
        """Where the log asked for starts (this log's end, a partial record included)."""
        self._asked_at: float | None = None
        """When the request waiting for its answer left (None: none waits)."""
        self._watchdog = self._loop.call_later(REQUEST_TIMEOUT_S, self._check)
        self._aside: asyncio.Task[None] | None = None
        """A metadata fetch running beside the requests."""
        self._durable: asyncio.Task[None] | None = None
        """Under Sync flush: the wait for the disk before the next request."""

    def ask(self, offset: int) -> None:
        """Ask for the log after ``offset``, acknowledging what this log holds."""
        self._offset = offset
        follower = self._follower
        request = RemotingCommand.request(
            RequestCode.REPLICATE_LOG,
            {
                "replicaId": follower.replica_id,
                "offset": str(offset),
                "ackOffset": str(self._store.commitlog.write_offset),
                "maxBytes": str(follower.max_bytes),
            },
        )
        signer = follower.signer
        if signer is not None:
            signer(request)
        self._asked_at = self._loop.time()
        self._connection.expect(request, self)

    def close(self) -> None:
        self._watchdog.cancel()
        for task in (self._aside, self._durable):
            if task is not None:
                task.cancel()
        if not self.ended.done():
            self.ended.cancel()

    # -------------------------------------------------------- the connection's waiter
    def done(self) -> bool:
        return self.ended.done()

    def set_result(self, response: RemotingCommand, /) -> None:
        try:
            self._answered(response)
        except Exception as exc:  # noqa: BLE001 - whatever it is ends this exchange
            self._end(exc)

    def set_exception(self, exception: BaseException, /) -> None:
        self._end(exception)

    # ------------------------------------------------------------------ answers
    def _answered(self, response: RemotingCommand) -> None:
        self._asked_at = None
        follower, store, address = self._follower, self._store, self._address
        state = follower.state
        ext = succeeded(address, response).ext_fields
        offset = self._offset
        if field_number(ext, "offset", -1) != offset:
            raise ReplicationError(f"master answered for offset {ext.get('offset')}")
        epoch = field_number(ext, "epoch", 0)
        if epoch < state.master_epoch:
            raise ReplicationError(
                f"master {address} is in epoch {epoch}; this replica has seen {state.master_epoch}"
            )
        state.master_end = field_number(ext, "maxOffset", 0)
        body = response.body
        if not body:
            self.ask(offset)
        elif self._sync_flush:
            appended = store.replica.apply(offset, body)
            follower.on_appended(appended)
            # acknowledge only what is on disk: a Sync write counts on it
            self._durable = self._beside(self._when_durable(store.replica.received_offset))
        else:
            appended = store.replica.apply(offset, body, written=self._acknowledge)
            follower.on_appended(appended)
        limit = field_number(ext, "readLimit", -1)
        follower.on_read_limit(None if limit < 0 else limit)
        if self._aside is None and follower.wants_metadata(ext.get("metadataVersion")):
            self._aside = self._beside(self._fetch_metadata())

    def _acknowledge(self) -> None:
        self.ask(self._store.replica.received_offset)

    async def _when_durable(self, offset: int) -> None:
        store = self._store
        await asyncio.wrap_future(store.durable(store.commitlog.write_offset))
        self._durable = None
        self.ask(offset)

    async def _fetch_metadata(self) -> None:
        await self._follower.fetch_metadata(self._address)
        self._aside = None

    def _beside(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = self._loop.create_task(work)
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and (exc := task.exception()) is not None:
            self._end(exc)

    def _check(self) -> None:
        asked_at = self._asked_at
        now = self._loop.time()
        if asked_at is not None and now - asked_at >= REQUEST_TIMEOUT_S:
            self._end(
                RemotingTimeoutError(
                    f"REPLICATE_LOG to {self._address}: no response within {REQUEST_TIMEOUT_S:g}s"
                )
            )
            return
        due = REQUEST_TIMEOUT_S if asked_at is None else asked_at + REQUEST_TIMEOUT_S - now
        self._watchdog = self._loop.call_later(due, self._check)

    def _end(self, exception: BaseException) -> None:
        if not self.ended.done():
            self.ended.set_exception(exception)


def succeeded(address: str, response: RemotingCommand) -> RemotingCommand:
    """``response`` if it is SUCCESS; otherwise a ReplicationError naming the master."""
    if response.code != ResponseCode.SUCCESS:
        raise ReplicationError(f"master {address} answered {response.code}: {response.remark}")
    return response


def field_number(fields: Mapping[str, str], name: str, default: int) -> int:
    """A numeric field of a master's answer (``default`` when absent); a garbled one ends this
    connection with a ReplicationError, as any bad answer does, instead of the follower."""
    value = fields.get(name)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise ReplicationError(f"master answered {name}={value!r}, not a number") from None
