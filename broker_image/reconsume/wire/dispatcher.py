"""Dispatching what one socket read holds: each request to the handler of its code, and the
writes the read causes held until it is done, one write per connection (the answers to the
requests of one read, or the Sync-replicated sends one acknowledgement releases), with work a
handler puts off until then (:meth:`Dispatcher.after_read`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from reconsume.wire.command import RemotingCommand

if TYPE_CHECKING:
    from reconsume.wire.transport import Connection

log = logging.getLogger(__name__)

HandlerResult = RemotingCommand | None
Handler = Callable[[RemotingCommand, "Connection"], HandlerResult | Awaitable[HandlerResult]]
"""Answers a request: a response, None (no answer, e.g. oneway), or an awaitable of either."""
Guard = Callable[[RemotingCommand, "Connection"], RemotingCommand | None]
"""Runs before every handler: None lets the request through, a response refuses it (access
control, :class:`reconsume.access.guard.AclGuard`)."""


class Dispatcher:
    """Request code → handler. Unknown codes answer REQUEST_CODE_NOT_SUPPORTED; a request of a
    served code goes through ``guard`` first when there is one."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._handlers: dict[int, Handler] = {}
        self.guard: Guard | None = None
        self._reading = False
        """Whether a read of one of this dispatcher's connections is being dispatched."""
        self._after_read: list[Callable[[], None]] = []
        """What :meth:`after_read` put off until that read is done (empty on most reads: no
        list is made per read)."""
        self._corked: list[Connection] = []
        """Connections written to while that read is dispatched, their frames held in their
        outboxes until it is done (:meth:`Connection.send`)."""
        self._direct: Connection | None = None
        """The connection of a read of one request: its answer is the read's one write to it
        and leaves at once, without an outbox."""

    def register(self, code: int, handler: Handler) -> None:
        self._handlers[code] = handler

    def handler(self, code: int) -> Handler | None:
        return self._handlers.get(code)

    def after_read(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once the read being dispatched has run every request it holds
        (at once when no read is): called again within the same read, it still runs once.
        A master answers its replicas' held requests so — with every send of a read
        appended, in one answer, instead of with the first while the rest wait for the
        next round trip. In a read of one request the callback runs at once, and what it
        writes leaves at once."""
        if not self._reading:
            callback()
        elif self._direct is not None:
            # A read of one request, whose handler is calling: nothing of the read comes after
            # it to wait for. What the callback writes leaves now, before the rest of that
            # handler (a Sync-replicated send's bookkeeping after its append).
            self._run(callback)
            self.uncork()
        elif callback not in self._after_read:
            self._after_read.append(callback)

    def as_read(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` as a read is dispatched (at once, within one that is): what it
        writes to each connection leaves in one write when it returns, and what it puts off
        with :meth:`after_read` runs then. Writes that one event releases together — the sends
        one fsync made durable — leave together so."""
        if self._reading:
            callback()
            return
        self._reading = True
        self._direct = None
        try:
            callback()
        finally:
            self._read_done()

    def _read_done(self) -> None:
        """The read is dispatched: the callbacks put off until now run (they write at once: a
        master's answers to its replicas are what its Sync writes wait for), then each
        connection written to during the read gets what was written to it in one write."""
        self._reading = False
        self._direct = None
        if self._after_read:
            pending, self._after_read = self._after_read, []
            for callback in pending:
                self._run(callback)
        self.uncork()

    def _run(self, callback: Callable[[], None]) -> None:
        try:
            callback()
        except Exception:
            log.exception("%s: a callback after a read failed", self.name)

    def uncork(self) -> None:
        """Write now what the read being dispatched has written so far, one write per
        connection; what it writes after is held again until it is done. A replica's
        acknowledgement releases the sends it covers so, before the master holds the
        replica's request."""
        if self._corked:
            corked, self._corked = self._corked, []
            for connection in corked:
                connection._uncork()
