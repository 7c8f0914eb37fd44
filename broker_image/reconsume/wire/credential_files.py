"""Credentials from files that change under a running client: a mounted Kubernetes Secret.

A Secret mounted as a volume is a directory with one file per key (``accessKey``,
``secretKey``, and ``securityToken`` when the account has one). When the Secret changes — a key
rotated — the kubelet writes the new files beside the old ones and swaps a symbolic link, so
each file's identity (device, inode, size, modification time) changes at once.
:class:`CredentialFiles` signs with what the files hold, looking at them at most once per
``check_interval_s`` and reading them again when they changed: a client picks up a rotated key
within about a second of the volume's update, without a restart. During a rotation both the
old and the new key are valid on the servers, so no request fails in between.

Files that do not read (one missing or empty) keep the credentials in force, with a log line;
they are read again at their next change.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

from reconsume.errors import InvalidArgumentError
from reconsume.wire.command import RemotingCommand
from reconsume.wire.signing import Credentials

log = logging.getLogger(__name__)

ACCESS_KEY_FILE = "accessKey"
SECRET_KEY_FILE = "secretKey"
SECURITY_TOKEN_FILE = "securityToken"
CREDENTIALS_DIR_ENV = "RECONSUME_CREDENTIALS_DIR"
"""A directory of credential files (a mounted Secret) every client of the process signs with;
it takes precedence over ``RECONSUME_ACCESS_KEY``/``RECONSUME_SECRET_KEY``."""
CHECK_INTERVAL_S = 1.0

Stamp = tuple[tuple[int, int, int, int], ...]


def _stamp(paths: tuple[Path, ...]) -> Stamp:
    stamps = []
    for path in paths:
        try:
            status = os.stat(path)
        except FileNotFoundError:
            stamps.append((0, 0, 0, 0))
            continue
        stamps.append((status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns))
    return tuple(stamps)


def _read(path: Path) -> str | None:
    """The file's text without surrounding white space; None when it is absent."""
    try:
        return path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        raise InvalidArgumentError(f"credentials: {path} is not UTF-8") from None


def _required(directory: Path, name: str) -> str:
    value = _read(directory / name)
    if value is None:
        raise InvalidArgumentError(f"credentials: {directory / name} is missing")
    if not value:
        raise InvalidArgumentError(f"credentials: {directory / name} is empty")
    return value


def read_credentials(directory: Path) -> Credentials:
    """The credentials the files in ``directory`` hold (surrounding white space dropped)."""
    return Credentials(
        _required(directory, ACCESS_KEY_FILE),
        _required(directory, SECRET_KEY_FILE),
        _read(directory / SECURITY_TOKEN_FILE) or None,
    )


class CredentialFiles:
    """Signs with the credentials in ``directory``, read again when the files change. The
    first read happens here: a client whose credential files are missing does not start."""

    def __init__(
        self,
        directory: str | Path,
        *,
        check_interval_s: float = CHECK_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.directory = Path(directory)
        self._paths = tuple(
            self.directory / name
            for name in (ACCESS_KEY_FILE, SECRET_KEY_FILE, SECURITY_TOKEN_FILE)
        )
        self._interval_s = check_interval_s
        self._clock = clock
        self._stamp = _stamp(self._paths)
        self.credentials = read_credentials(self.directory)
        self._checked_at = clock()
        self.reloads = 0

    def current(self) -> Credentials:
        """The credentials in force, after a look at the files when one is due."""
        now = self._clock()
        if now - self._checked_at >= self._interval_s:
            self._checked_at = now
            stamp = _stamp(self._paths)
            if stamp != self._stamp:
                self._stamp = stamp
                try:
                    credentials = read_credentials(self.directory)
                except (InvalidArgumentError, OSError) as exc:
                    log.warning("credentials not reloaded, keeping those in force: %s", exc)
                else:
                    if credentials != self.credentials:
                        log.info(
                            "credentials reloaded from %s: access key %s",
                            self.directory,
                            credentials.access_key,
                        )
                        self.credentials = credentials
                        self.reloads += 1
        return self.credentials

    def sign(self, request: RemotingCommand) -> None:
        """Sign ``request`` in place (a :data:`reconsume.wire.endpoints.Signer`)."""
        self.current().sign(request)


def environment_signer(
    environ: dict[str, str] | None = None,
) -> Callable[[RemotingCommand], None] | None:
    """What a client signs with when given nothing: the files of ``RECONSUME_CREDENTIALS_DIR``,
    else ``RECONSUME_ACCESS_KEY``/``RECONSUME_SECRET_KEY``, else nothing (unsigned)."""
    env = os.environ if environ is None else environ
    directory = env.get(CREDENTIALS_DIR_ENV, "").strip()
    if directory:
        return CredentialFiles(directory).sign
    credentials = Credentials.from_environment(env)
    return None if credentials is None else credentials.sign
