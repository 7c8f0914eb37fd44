"""Request signing as Apache RocketMQ's ACL does it (``AclClientRPCHook`` on the client,
``PlainAccessResource.parse`` and ``AclUtils.combineRequestContent`` on the broker).

A client adds ``AccessKey`` (and ``SecurityToken`` when it has one) to the request's ext fields,
then signs the values of all its ext fields, sorted by key, followed by the body:
``Signature = Base64(HMAC-SHA1(secret key, content))``. The server recomputes the same content
from what it received, leaving ``Signature`` itself out, and compares. RocketMQ 4.9.4 and
later clients, Go's rocketmq-client-go (without a security token) and Node's ali-ons all sign
this way, so one rule verifies all of them.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol

from reconsume.errors import InvalidArgumentError
from reconsume.wire.command import RemotingCommand

ACCESS_KEY = "AccessKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"
UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"
"""Added by ``queryMessage`` outside the custom header: clients up to 4.9.3 sent it unsigned."""
UNSIGNED_UNIQUE_KEY_QUERY_MAX_VERSION = 399
"""``MQVersion.Version.V4_9_3.ordinal()``: up to this request version ``_UNIQUE_KEY_QUERY`` is
left out of the content (RocketMQ 5.1's rule; 4.9.x always left it out, which broke
QUERY_MESSAGE signed by 4.9.4+ clients)."""


def _java_order(keys: Iterable[str]) -> list[str]:
    """Keys in Java's ``String.compareTo`` order, the order of RocketMQ's ``TreeMap``.

    Java compares UTF-16 code units; Python compares code points. The two differ once a key
    holds a character above U+FFFF: its surrogate pair (U+D800..U+DFFF) sorts below
    U+E000..U+FFFF in Java and above them in Python, so the values would be concatenated in
    another order and the signature would not match. Big-endian UTF-16 bytes compare like
    the code units (``surrogatepass`` keeps a lone surrogate as Java keeps it). All-ASCII keys,
    the usual case, sort the same either way and skip the encoding.
    """
    ordered = list(keys)
    if all(key.isascii() for key in ordered):
        ordered.sort()
    else:
        ordered.sort(key=lambda key: key.encode("utf-16-be", "surrogatepass"))
    return ordered


def _head(ext_fields: Mapping[str, str], version: int) -> bytes:
    """The ext-field part of the content: values only, in key order, no separators.

    ``errors="replace"`` writes a lone surrogate (JSON can carry one) as ``?``, as Java's
    ``String.getBytes(UTF_8)`` does."""
    skip_unique_key = version <= UNSIGNED_UNIQUE_KEY_QUERY_MAX_VERSION
    keys = [
        key
        for key in ext_fields
        if key != SIGNATURE and not (skip_unique_key and key == UNIQUE_KEY_QUERY)
    ]
    text = "".join(ext_fields[key] for key in _java_order(keys))
    return text.encode("utf-8", "replace")


def signed_content(ext_fields: Mapping[str, str], body: bytes, version: int) -> bytes:
    """What is signed: the values (not the keys) of every ext field but ``Signature``,
    sorted by key and concatenated, as UTF-8, then the raw body. ``_UNIQUE_KEY_QUERY`` is left
    out when ``version`` is 4.9.3's or older (those clients did not sign it)."""
    return _head(ext_fields, version) + body


def _mac(parts: Iterable[bytes], secret_key: str) -> str:
    mac = hmac.new(secret_key.encode("utf-8"), digestmod=hashlib.sha1)
    for part in parts:
        mac.update(part)
    return base64.b64encode(mac.digest()).decode("ascii")


def signature(content: bytes, secret_key: str) -> str:
    """``Base64(HMAC-SHA1(secret_key, content))``: standard alphabet, padded, one line."""
    return _mac((content,), secret_key)


def expected_signature(request: RemotingCommand, secret_key: str) -> str:
    """The signature ``request`` should carry under ``secret_key`` (the body is fed to the
    MAC as it is, not copied into the content)."""
    return _mac((_head(request.ext_fields, request.version), request.body), secret_key)


def sign(
    request: RemotingCommand,
    access_key: str,
    secret_key: str,
    security_token: str | None = None,
) -> None:
    """Sign ``request`` in place as a client does: add ``AccessKey`` (and ``SecurityToken``),
    then ``Signature`` over all ext fields and the body. Fill the ext fields in first: a field
    added afterwards breaks the signature."""
    request.ext_fields[ACCESS_KEY] = access_key
    if security_token is not None:
        request.ext_fields[SECURITY_TOKEN] = security_token
    request.ext_fields[SIGNATURE] = expected_signature(request, secret_key)


def signature_matches(request: RemotingCommand, secret_key: str) -> bool:
    """Whether the request's ``Signature`` is the one ``secret_key`` gives, compared in
    constant time; False when there is none."""
    received = request.ext_fields.get(SIGNATURE)
    if not received:
        return False
    expected = expected_signature(request, secret_key)
    # Bytes, not str: compare_digest refuses a str holding anything but ASCII.
    return hmac.compare_digest(expected.encode("ascii"), received.encode("utf-8", "replace"))


ACCESS_KEY_ENV = "RECONSUME_ACCESS_KEY"
SECRET_KEY_ENV = "RECONSUME_SECRET_KEY"
"""The environment variables a process's clients take their credentials from when given none
(a pod gets them from a Secret: ``env[].valueFrom.secretKeyRef``)."""


@dataclass(frozen=True)
class Credentials:
    """An access key and its secret key (and a security token, when the account has one):
    what a client signs its requests with. The secret key is in no ``repr``."""

    access_key: str
    secret_key: str = field(repr=False)
    security_token: str | None = field(default=None, repr=False)

    def sign(self, request: RemotingCommand) -> None:
        """Sign ``request`` in place (a :data:`reconsume.wire.endpoints.Signer`)."""
        sign(request, self.access_key, self.secret_key, self.security_token)

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> Credentials | None:
        """Credentials from :data:`ACCESS_KEY_ENV` and :data:`SECRET_KEY_ENV`, or None when the
        access key is unset or empty. One without the other is an error."""
        env = os.environ if environ is None else environ
        access_key = env.get(ACCESS_KEY_ENV, "").strip()
        secret_key = env.get(SECRET_KEY_ENV, "").strip()
        if not access_key and not secret_key:
            return None
        if not access_key or not secret_key:
            missing = ACCESS_KEY_ENV if not access_key else SECRET_KEY_ENV
            raise InvalidArgumentError(
                f"{missing} is empty while the other is set: set both or neither"
            )
        return cls(access_key, secret_key)


class Signing(Protocol):
    """What signs a client's requests: :class:`Credentials`, or
    :class:`~reconsume.wire.credential_files.CredentialFiles` (read again when they change)."""

    def sign(self, request: RemotingCommand) -> None: ...


def signer_or_environment(
    credentials: Signing | None,
) -> Callable[[RemotingCommand], None] | Literal["environment"]:
    """A client's ``signer`` argument: the credentials given, else those of the environment."""
    return "environment" if credentials is None else credentials.sign
