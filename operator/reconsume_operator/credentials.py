"""Access keys in Secrets: generating them, reading them, and rotating a generated one.

A credentials Secret holds ``accessKey`` and ``secretKey`` (the files a client mounts:
``reconsume.wire.credential_files``). One the operator generated is labelled
``app.kubernetes.io/managed-by: reconsume-operator`` and carries the rotation token its key was
made for (:data:`TOKEN_ANNOTATION`). A rotation has two steps, so that no client ever signs
with a key a broker does not know yet:

1. the new pair is added as ``nextAccessKey``/``nextSecretKey`` (files no client reads) and
   the ACL rendered with it beside the current one;
2. once every broker enforces that ACL, the new pair becomes ``accessKey``/``secretKey`` and
   the old one ``previousAccessKey``/``previousSecretKey`` until :data:`EXPIRES_ANNOTATION`:
   the ACL holds both until then, so clients that have not yet read the new files keep
   working.

A Secret the operator did not generate is adopted as it is and never written.
"""

from __future__ import annotations

import base64
import binascii
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from reconsume.access.acl import KEY_MIN_LENGTH

ACCESS_KEY = "accessKey"
SECRET_KEY = "secretKey"
PREVIOUS_ACCESS_KEY = "previousAccessKey"
PREVIOUS_SECRET_KEY = "previousSecretKey"
NEXT_ACCESS_KEY = "nextAccessKey"
NEXT_SECRET_KEY = "nextSecretKey"
NEXT_TOKEN_ANNOTATION = "reconsume.io/next-rotation-token"
TOKEN_ANNOTATION = "reconsume.io/rotation-token"
EXPIRES_ANNOTATION = "reconsume.io/previous-key-expires"
MANAGED_BY = ("app.kubernetes.io/managed-by", "reconsume-operator")
_PREFIX_CHARACTERS = re.compile(r"[^A-Za-z0-9_-]")
PREFIX_MAX = 40


def new_key_pair(prefix: str) -> tuple[str, str]:
    """A fresh access key (``prefix``, cut to :data:`PREFIX_MAX` characters, and 8 random hex
    digits: readable in refusals and logs) and secret key (256 random bits)."""
    readable = _PREFIX_CHARACTERS.sub("-", prefix)[:PREFIX_MAX]
    access_key = f"{readable}-{secrets.token_hex(4)}"
    return access_key, secrets.token_urlsafe(32)


def _decoded(data: Mapping[str, Any], key: str) -> str | None:
    value = data.get(key)
    if not isinstance(value, str):
        return None
    try:
        return base64.b64decode(value, validate=True).decode("utf-8").strip() or None
    except (binascii.Error, UnicodeDecodeError):
        return None


@dataclass(frozen=True)
class StoredKeys:
    """The keys a credentials Secret holds."""

    name: str
    access_key: str
    secret_key: str = field(repr=False)
    generated: bool
    token: str = ""
    previous: tuple[str, str] | None = field(default=None, repr=False)
    previous_expires: datetime | None = None
    next: tuple[str, str] | None = field(default=None, repr=False)
    """A rotation's new pair, not yet handed to clients (step 1)."""
    next_token: str = ""

    def pairs(self, now: datetime) -> list[tuple[str, str]]:
        """The key pairs valid at ``now``: the current one, a rotation's next one, and the
        previous one until it expires."""
        pairs = [(self.access_key, self.secret_key)]
        if self.next is not None:
            pairs.append(self.next)
        if self.previous is not None and not self.expired(now):
            pairs.append(self.previous)
        return pairs

    def expired(self, now: datetime) -> bool:
        """Whether a previous key is held past its window (the Secret should drop it)."""
        return (
            self.previous is not None
            and self.previous_expires is not None
            and now >= self.previous_expires
        )


class CredentialsProblem(Exception):
    """A Secret that cannot serve as credentials; the message names it and what it lacks."""


def stored_keys(secret: Mapping[str, Any]) -> StoredKeys:
    """The keys of a Secret object (as the API server returns it)."""
    metadata = secret.get("metadata") or {}
    name = str(metadata.get("name"))
    data = secret.get("data") or {}
    access_key, secret_key = _decoded(data, ACCESS_KEY), _decoded(data, SECRET_KEY)
    if access_key is None or secret_key is None:
        raise CredentialsProblem(
            f"Secret {name} must hold {ACCESS_KEY} and {SECRET_KEY} (UTF-8, base64 in data)"
        )
    for what, key in ((ACCESS_KEY, access_key), (SECRET_KEY, secret_key)):
        if len(key) < KEY_MIN_LENGTH:
            raise CredentialsProblem(
                f"Secret {name}: {what} must be at least {KEY_MIN_LENGTH} characters"
            )
    labels = metadata.get("labels") or {}
    annotations = metadata.get("annotations") or {}
    generated = labels.get(MANAGED_BY[0]) == MANAGED_BY[1]
    previous_access, previous_secret = (
        _decoded(data, PREVIOUS_ACCESS_KEY),
        _decoded(data, PREVIOUS_SECRET_KEY),
    )
    previous = None
    if previous_access is not None and previous_secret is not None:
        previous = (previous_access, previous_secret)
    next_access, next_secret = _decoded(data, NEXT_ACCESS_KEY), _decoded(data, NEXT_SECRET_KEY)
    next_pair = None if next_access is None or next_secret is None else (next_access, next_secret)
    expires = None
    if (text := annotations.get(EXPIRES_ANNOTATION)) is not None:
        try:
            expires = datetime.fromisoformat(str(text))
        except ValueError:
            expires = None  # unreadable: expired
        previous = previous if expires is not None else None
    return StoredKeys(
        name=name,
        access_key=access_key,
        secret_key=secret_key,
        generated=generated,
        token=str(annotations.get(TOKEN_ANNOTATION, "")),
        previous=previous,
        previous_expires=expires,
        next=next_pair,
        next_token=str(annotations.get(NEXT_TOKEN_ANNOTATION, "")),
    )


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def credentials_secret(
    name: str,
    namespace: str,
    labels: Mapping[str, str],
    pair: tuple[str, str],
    token: str = "",
    previous: tuple[str, str] | None = None,
    previous_expires: datetime | None = None,
    next_pair: tuple[str, str] | None = None,
    next_token: str = "",
) -> dict[str, Any]:
    """A generated credentials Secret (without owner references: the caller adopts it)."""
    data = {ACCESS_KEY: _b64(pair[0]), SECRET_KEY: _b64(pair[1])}
    annotations = {TOKEN_ANNOTATION: token}
    if previous is not None and previous_expires is not None:
        data[PREVIOUS_ACCESS_KEY] = _b64(previous[0])
        data[PREVIOUS_SECRET_KEY] = _b64(previous[1])
        annotations[EXPIRES_ANNOTATION] = previous_expires.isoformat()
    if next_pair is not None:
        data[NEXT_ACCESS_KEY] = _b64(next_pair[0])
        data[NEXT_SECRET_KEY] = _b64(next_pair[1])
        annotations[NEXT_TOKEN_ANNOTATION] = next_token
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {**labels, MANAGED_BY[0]: MANAGED_BY[1]},
            "annotations": annotations,
        },
        "data": data,
    }


def rotated(
    stored: StoredKeys,
    namespace: str,
    labels: Mapping[str, str],
    prefix: str,
    token: str,
    now: datetime,
) -> dict[str, Any] | None:
    """The Secret ``stored`` should become: with a new next pair when ``token`` differs from
    the one its key (or its pending next pair) was made for (step 1), or without its previous
    pair once that expired; None when it stays as it is (and always for an adopted Secret)."""
    if not stored.generated:
        return None
    current = (stored.access_key, stored.secret_key)
    previous = None if stored.expired(now) else stored.previous
    pending = stored.next_token if stored.next is not None else stored.token
    if token != pending:
        return credentials_secret(
            stored.name, namespace, labels, current, stored.token, previous,
            stored.previous_expires, new_key_pair(prefix), token,
        )  # fmt: skip
    if stored.expired(now):
        return credentials_secret(
            stored.name, namespace, labels, current, stored.token, None, None,
            stored.next, stored.next_token,
        )  # fmt: skip
    return None


def promoted(
    stored: StoredKeys, namespace: str, labels: Mapping[str, str], window_s: int, now: datetime
) -> dict[str, Any] | None:
    """Step 2 of a rotation, once every broker knows the next pair: it becomes the current
    one, the current one the previous one for ``window_s`` (none with 0); None when no
    rotation is pending."""
    if stored.next is None:
        return None
    current = (stored.access_key, stored.secret_key)
    if window_s <= 0:
        return credentials_secret(stored.name, namespace, labels, stored.next, stored.next_token)
    expires = now + timedelta(seconds=window_s)
    return credentials_secret(
        stored.name, namespace, labels, stored.next, stored.next_token, current, expires
    )
