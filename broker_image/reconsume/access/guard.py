"""The guard a server puts in front of its handlers when access control is on: every request
is checked against the ACL file before its handler runs, a refused one is answered with the
refusal (NO_PERMISSION, 16, naming account, resource and permission) and counted, and the
file is read again when it changes.

A refusal is logged once per message (the message names the account or the peer, and the
resource), not once per request: a client retrying a refused request, or a flood of them,
costs a counter increment each and no log line. Secret keys appear nowhere: the messages name
access keys only.

A reload that fails (a file half-written, a bad permission) keeps the ACL in force and says
why, so a mistake in an edit never opens the server or locks everyone out; the next change of
the file is read again. Kubernetes updates a mounted Secret by swapping a symbolic link: the
file's identity (device, inode, size, modification time) changes, which is what is watched.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

from reconsume.access.acl import Acl, Refusal, read_acl
from reconsume.access.perms import Perm, Rules
from reconsume.errors import InvalidArgumentError
from reconsume.wire.command import RemotingCommand
from reconsume.wire.transport import Connection

log = logging.getLogger(__name__)

RELOAD_INTERVAL_S = 1.0
"""Seconds between looks at the ACL file: a revocation takes effect within this (plus the
time Kubernetes takes to update a mounted Secret)."""
LOGGED_MAX = 4096
"""Distinct refusal messages remembered as logged; beyond this the memory starts over."""

Stamp = tuple[int, int, int, int]


def _stamp(path: Path) -> Stamp:
    status = os.stat(path)
    return status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns


class AclGuard:
    """Checks requests against the ACL file at ``path`` with a server's ``rules``. The file is
    read here: a server whose ACL file is missing or invalid does not start."""

    def __init__(self, path: str | Path, rules: Rules, server: str) -> None:
        self.path = Path(path)
        self.rules = rules
        self.server = server
        self._stamp = _stamp(self.path)
        self.acl: Acl
        self.acl, self.digest = read_acl(self.path)
        """The ACL in force and the digest of the file it was read from (``aclDigest``)."""
        self.refused: Counter[str] = Counter()
        """Refused requests by reason (``unsigned``, ``unknown_account``, ``bad_signature``,
        ``not_admin``, ``no_permission``, ``malformed``)."""
        self.reloads = 0
        self.reload_failures = 0
        self.last_reload_failed = False
        """The file last changed into one that does not read: an older ACL is in force (until
        the file changes again and reads). The counters cannot tell it: a failure and a success
        between two scrapes are not ordered by them."""
        self._logged: set[str] = set()
        self._task: asyncio.Task[None] | None = None
        log.info(
            "%s: access control on, %d account(s) from %s",
            server,
            len(self.acl.accounts),
            self.path,
        )

    def __call__(self, request: RemotingCommand, connection: Connection) -> RemotingCommand | None:
        """None to let ``request`` through, else the refusal to answer it with."""
        peer = connection.peer_host
        refusal = self.acl.check(request, peer, self.rules)
        if refusal is None:
            return None
        self.refused[refusal.reason] += 1
        if refusal.message not in self._logged:
            if len(self._logged) >= LOGGED_MAX:
                self._logged.clear()
            self._logged.add(refusal.message)
            log.warning("%s: refused a request from %s: %s", self.server, peer, refusal.message)
        return request.respond(refusal.code, refusal.message)

    def check_grpc(
        self,
        access_key: str,
        signed: Callable[[str], bool],
        peer: str,
        needs: Sequence[tuple[str, Perm]],
    ) -> Refusal | None:
        """:meth:`Acl.check_signed`, counted and logged as refusals of remoting requests are."""
        refusal = self.acl.check_signed(access_key, signed, peer, needs)
        if refusal is not None:
            self.refused[refusal.reason] += 1
            if refusal.message not in self._logged:
                if len(self._logged) >= LOGGED_MAX:
                    self._logged.clear()
                self._logged.add(refusal.message)
                log.warning("%s: refused a gRPC request from %s: %s",
                            self.server, peer, refusal.message)  # fmt: skip
        return refusal

    def reload_if_changed(self) -> bool:
        """Read the file again if it changed; whether a new ACL is in force."""
        try:
            stamp = _stamp(self.path)
        except OSError as exc:
            if self._stamp != (0, 0, 0, 0):
                log.warning(
                    "%s: ACL file unreadable, keeping the ACL in force: %s", self.server, exc
                )
                self._stamp = (0, 0, 0, 0)
                self.reload_failures += 1
                self.last_reload_failed = True
            return False
        if stamp == self._stamp:
            return False
        self._stamp = stamp
        try:
            acl, digest = read_acl(self.path)
        except (InvalidArgumentError, OSError) as exc:
            self.reload_failures += 1
            self.last_reload_failed = True
            log.warning("%s: ACL file not reloaded, keeping the ACL in force: %s", self.server, exc)
            return False
        self.acl, self.digest = acl, digest
        self.reloads += 1
        self.last_reload_failed = False
        self._logged.clear()
        log.info("%s: ACL reloaded, %d account(s)", self.server, len(acl.accounts))
        return True

    def start(self, interval_s: float = RELOAD_INTERVAL_S) -> None:
        """Watch the file from the running event loop until :meth:`stop`."""

        async def watch() -> None:
            while True:
                await asyncio.sleep(interval_s)
                self.reload_if_changed()

        self._task = asyncio.create_task(watch(), name=f"{self.server}-acl-watch")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
