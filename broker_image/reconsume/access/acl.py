"""Access control compatible with Apache RocketMQ's plain ACL: accounts with an access key and a
secret key, per-topic and per-group permissions, IP whitelists, and the decision for one
request (RocketMQ's ``PlainPermissionManager.validate``).

The ACL file is TOML; the fields are RocketMQ's ``plain_acl.yml`` ones in snake case, and
``topic_perms``/``group_perms`` are tables instead of ``name=PERM`` strings::

    global_white_remote_addresses = ["10.10.103.*"]
    [[accounts]]
    access_key = "orders-team"
    secret_key = "..."
    admin = false
    default_topic_perm = "DENY"
    default_group_perm = "SUB"
    topic_perms = { orders = "PUB|SUB", audit = "SUB" }
    group_perms = { "orders-consumers" = "SUB" }
    white_remote_address = "192.168.1.*"

Unlike RocketMQ, which reads a misspelt permission as DENY and skips a bad account with a log
line, anything it cannot read is an error at load time naming the account and the field.
A missing default permission is DENY, as in RocketMQ. Secret keys appear in no message and no
``repr``.

What each request needs is the server's :class:`~reconsume.access.perms.Rules`: the broker's
``reconsume.broker.acl_resources``, the name server's ``reconsume.namesrv.access``.
"""

from __future__ import annotations

import hashlib
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reconsume.access.addresses import AddressPattern, address_matches, parse_address_pattern
from reconsume.access.perms import Perm, Rules, allows, is_group_resource, perm_name
from reconsume.errors import InvalidArgumentError
from reconsume.message.names import (
    DLQ_GROUP_TOPIC_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    validate_group,
    validate_topic,
)
from reconsume.wire.codes import RequestCode, ResponseCode
from reconsume.wire.command import RemotingCommand
from reconsume.wire.signing import ACCESS_KEY, signature_matches

__all__ = [
    "Account",
    "Acl",
    "Perm",
    "Refusal",
    "acl_digest",
    "address_matches",
    "load_acl",
    "parse_acl",
    "parse_perm",
    "read_acl",
]

KEY_MIN_LENGTH = 7
"""RocketMQ refuses access and secret keys of 6 characters or fewer (``length() <= 6``)."""
SHOWN_KEY_MAX = 32
"""An unknown access key is echoed in a refusal up to this many characters."""

_PERMS = {
    "PUB": Perm.PUB,
    "SUB": Perm.SUB,
    "PUB|SUB": Perm.PUB | Perm.SUB,
    "SUB|PUB": Perm.PUB | Perm.SUB,
    "DENY": Perm.DENY,
}
_ACCOUNT_FIELDS = frozenset(
    {
        "access_key",
        "secret_key",
        "admin",
        "default_topic_perm",
        "default_group_perm",
        "topic_perms",
        "group_perms",
        "white_remote_address",
    }
)
_FILE_FIELDS = frozenset({"global_white_remote_addresses", "accounts"})


def parse_perm(text: object, where: str) -> Perm:
    """``PUB``, ``SUB``, ``PUB|SUB`` (or ``SUB|PUB``) or ``DENY``; ``where`` names the entry in
    the error."""
    perm = _PERMS.get(text.strip()) if isinstance(text, str) else None
    if perm is None:
        raise InvalidArgumentError(
            f"{where}: {text!r} is not a permission (PUB, SUB, PUB|SUB or DENY)"
        )
    return perm


@dataclass(frozen=True)
class Account:
    """One access key's secret, admin flag, permissions and whitelist. ``group_perms`` is
    keyed by group name (RocketMQ keys it ``%RETRY%<group>`` inside)."""

    access_key: str
    secret_key: str = field(repr=False)
    admin: bool = False
    default_topic_perm: Perm = Perm.DENY
    default_group_perm: Perm = Perm.DENY
    topic_perms: dict[str, Perm] = field(default_factory=dict)
    group_perms: dict[str, Perm] = field(default_factory=dict)
    white_remote_address: str | None = None

    def granted(self, resource: str) -> tuple[Perm, str]:
        """The permission on ``resource`` (a topic, or ``%RETRY%<group>``) and where it comes
        from, for messages: the explicit entry, else the default.

        The dead-letter jobs' group ``%DLQ%<group>`` (``dead_letter_job_group``) has the
        permission of ``<group>``, whose owner owns its dead letters and marks them handled
        (no ACL file can name ``%DLQ%<group>`` in ``group_perms``); an entry is then named as
        ``<group>``'s."""
        if is_group_resource(resource):
            group = resource[len(RETRY_GROUP_TOPIC_PREFIX) :]
            of = ""
            if group.startswith(DLQ_GROUP_TOPIC_PREFIX):
                group = group[len(DLQ_GROUP_TOPIC_PREFIX) :]
                of = f" of group {group}"
            if group in self.group_perms:
                return self.group_perms[group], f"group_perms entry{of}"
            return self.default_group_perm, "default_group_perm"
        if resource in self.topic_perms:
            return self.topic_perms[resource], "topic_perms entry"
        return self.default_topic_perm, "default_topic_perm"


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a request is refused: the response code and remark to answer with, and a short
    ``reason`` for metrics (``unsigned``, ``unknown_account``, ``bad_signature``,
    ``not_admin``, ``no_permission``, ``malformed``)."""

    reason: str
    message: str
    code: int = ResponseCode.NO_PERMISSION


def _code_name(code: int) -> str:
    try:
        return f"{code} ({RequestCode(code).name})"
    except ValueError:
        return str(code)


def _shown(access_key: str) -> str:
    """An access key a client sent, fit for a message and a log line: printable, truncated."""
    shown = "".join(c if c.isprintable() else "?" for c in access_key[:SHOWN_KEY_MAX])
    return shown + ("…" if len(access_key) > SHOWN_KEY_MAX else "")


@dataclass(frozen=True)
class Acl:
    """The accounts and the global whitelist; :meth:`check` decides one request."""

    accounts: Mapping[str, Account]
    global_white_remote_addresses: tuple[str, ...] = ()
    _global: tuple[AddressPattern, ...] = field(init=False, repr=False, compare=False)
    _whitelists: Mapping[str, AddressPattern] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        patterns = tuple(
            parse_address_pattern(p, "global_white_remote_addresses")
            for p in self.global_white_remote_addresses
        )
        whitelists = {
            key: parse_address_pattern(account.white_remote_address, f"account {key}")
            for key, account in self.accounts.items()
            if account.white_remote_address
        }
        object.__setattr__(self, "_global", patterns)
        object.__setattr__(self, "_whitelists", whitelists)

    def check(self, request: RemotingCommand, peer_ip: str, rules: Rules) -> Refusal | None:
        """None when ``request`` from ``peer_ip`` (no port) may go on, else why not. In
        RocketMQ's order: the server's open codes and the global whitelist (pass anything),
        an access key, a known
        account, the account's whitelist (passes without signature or permissions), the
        signature, the admin codes; an admin account then passes (RocketMQ 5.1.1 and later),
        others need every permission :func:`required` names.

        A request whose header or body does not parse is refused (``malformed``, with
        SYSTEM_ERROR as its handler would answer) rather than passed on unchecked."""
        if request.code in rules.open_codes:
            return None
        if any(pattern.matches(peer_ip) for pattern in self._global):
            return None
        access_key = request.ext_fields.get(ACCESS_KEY)
        if not access_key:
            return Refusal(
                "unsigned",
                f"request code {_code_name(request.code)} from {peer_ip} carries no AccessKey",
            )
        account = self.accounts.get(access_key)
        if account is None:
            return Refusal("unknown_account", f"no account for access key {_shown(access_key)}")
        whitelist = self._whitelists.get(access_key)
        if whitelist is not None and whitelist.matches(peer_ip):
            return None
        if not signature_matches(request, account.secret_key):
            return Refusal(
                "bad_signature",
                f"signature check failed for account {access_key}: the request was changed or "
                "signed with another secret key",
            )
        if request.code in rules.admin_codes and not account.admin:
            return Refusal(
                "not_admin",
                f"account {access_key} is not an admin: request code "
                f"{_code_name(request.code)} needs one",
            )
        if account.admin:
            return None
        try:
            needs = rules.required(request)
        except InvalidArgumentError as exc:
            return Refusal(
                "malformed",
                f"cannot tell what request code {_code_name(request.code)} needs: {exc}",
                ResponseCode.SYSTEM_ERROR,
            )
        return _permitted(account, needs)

    def check_signed(
        self,
        access_key: str,
        signed: Callable[[str], bool],
        peer_ip: str,
        needs: Sequence[tuple[str, Perm]],
    ) -> Refusal | None:
        """:meth:`check` for a request signed another way (RocketMQ 5's gRPC clients sign a
        timestamp): ``signed(secret_key)`` says whether the signature is the account's. The
        same order: the global whitelist, a known account, its whitelist, the signature, an
        admin, the permissions ``needs``."""
        if any(pattern.matches(peer_ip) for pattern in self._global):
            return None
        if not access_key:
            return Refusal("unsigned", f"a gRPC request from {peer_ip} carries no credential")
        account = self.accounts.get(access_key)
        if account is None:
            return Refusal("unknown_account", f"no account for access key {_shown(access_key)}")
        whitelist = self._whitelists.get(access_key)
        if whitelist is not None and whitelist.matches(peer_ip):
            return None
        if not signed(account.secret_key):
            return Refusal(
                "bad_signature",
                f"signature check failed for account {access_key}: the request was signed "
                "with another secret key",
            )
        if account.admin:
            return None
        return _permitted(account, needs)


def _permitted(account: Account, needs: Iterable[tuple[str, int]]) -> Refusal | None:
    for resource, need in needs:
        have, source = account.granted(resource)
        if not allows(have, need):
            group = is_group_resource(resource)
            name = resource[len(RETRY_GROUP_TOPIC_PREFIX) :] if group else resource
            return Refusal(
                "no_permission",
                f"account {account.access_key} has no {perm_name(need)} on "
                f"{'group' if group else 'topic'} {name} (its {source} is {perm_name(have)})",
            )
    return None


# ------------------------------------------------------------------ loading
def acl_digest(content: bytes) -> str:
    """What a server reports of the ACL file it enforces (``aclDigest`` of its runtime info):
    the first 16 hex digits of the file's SHA-256, which whoever wrote the file can compare."""
    return hashlib.sha256(content).hexdigest()[:16]


def load_acl(path: str | Path) -> Acl:
    """Read and validate an ACL file (TOML)."""
    return read_acl(path)[0]


def read_acl(path: str | Path) -> tuple[Acl, str]:
    """Read and validate an ACL file (TOML); with its :func:`acl_digest`."""
    with open(path, "rb") as file:
        content = file.read()
    try:
        document = tomllib.loads(content.decode("utf-8"))
    except tomllib.TOMLDecodeError as exc:
        # The message gives a line and column, never the text there (a secret, maybe).
        raise InvalidArgumentError(f"ACL file {path} is not TOML: {exc}") from None
    except UnicodeDecodeError:
        raise InvalidArgumentError(f"ACL file {path} is not UTF-8") from None
    return parse_acl(document, str(path)), acl_digest(content)


def parse_acl(document: Mapping[str, Any], source: str = "ACL") -> Acl:
    """An :class:`Acl` from a parsed ACL file; ``source`` names it in errors."""
    _no_unknown(document, _FILE_FIELDS, source)
    addresses = document.get("global_white_remote_addresses", [])
    if not isinstance(addresses, list) or not all(isinstance(a, str) for a in addresses):
        raise InvalidArgumentError(
            f"{source}: global_white_remote_addresses must be a list of strings"
        )
    for pattern in addresses:
        parse_address_pattern(pattern, f"{source}: global_white_remote_addresses")
    entries = document.get("accounts", [])
    if not isinstance(entries, list):
        raise InvalidArgumentError(f"{source}: accounts must be an array of tables")
    accounts: dict[str, Account] = {}
    for index, entry in enumerate(entries, 1):
        account = _account(entry, f"{source}: account {index}")
        if account.access_key in accounts:
            raise InvalidArgumentError(
                f"{source}: access key {account.access_key} is defined twice "
                f"(account {index} and an earlier one)"
            )
        accounts[account.access_key] = account
    return Acl(accounts, tuple(addresses))


def _no_unknown(table: Mapping[str, Any], known: frozenset[str], where: str) -> None:
    unknown = sorted(set(table) - known)
    if unknown:
        raise InvalidArgumentError(
            f"{where}: unknown field {', '.join(unknown)} (known: {', '.join(sorted(known))})"
        )


def _account(entry: object, where: str) -> Account:
    if not isinstance(entry, dict):
        raise InvalidArgumentError(f"{where} is not a table")
    access_key = entry.get("access_key")
    if isinstance(access_key, str):
        where = f"{where} ({_shown(access_key)})"
    _no_unknown(entry, _ACCOUNT_FIELDS, where)
    if not isinstance(access_key, str) or len(access_key) < KEY_MIN_LENGTH:
        raise InvalidArgumentError(
            f"{where}: access_key must be a string of at least {KEY_MIN_LENGTH} characters"
        )
    secret_key = entry.get("secret_key")
    if not isinstance(secret_key, str) or len(secret_key) < KEY_MIN_LENGTH:
        raise InvalidArgumentError(
            f"{where}: secret_key must be a string of at least {KEY_MIN_LENGTH} characters"
        )
    admin = entry.get("admin", False)
    if not isinstance(admin, bool):
        raise InvalidArgumentError(f"{where}: admin must be true or false")
    white = entry.get("white_remote_address")
    if white is not None:
        if not isinstance(white, str):
            raise InvalidArgumentError(f"{where}: white_remote_address must be a string")
        parse_address_pattern(white, f"{where}: white_remote_address")
    return Account(
        access_key=access_key,
        secret_key=secret_key,
        admin=admin,
        default_topic_perm=_default(entry, "default_topic_perm", where),
        default_group_perm=_default(entry, "default_group_perm", where),
        topic_perms=_perms(entry, "topic_perms", where),
        group_perms=_perms(entry, "group_perms", where),
        white_remote_address=white or None,
    )


def _default(entry: Mapping[str, Any], name: str, where: str) -> Perm:
    return parse_perm(entry[name], f"{where}: {name}") if name in entry else Perm.DENY


def _perms(entry: Mapping[str, Any], name: str, where: str) -> dict[str, Perm]:
    """``topic_perms`` or ``group_perms``: valid names (retry and dead-letter topics are their
    group's, so they are named in ``group_perms`` by the group) to permissions."""
    table = entry.get(name, {})
    if not isinstance(table, dict):
        raise InvalidArgumentError(f"{where}: {name} must be a table of name = permission")
    validate = validate_topic if name == "topic_perms" else validate_group
    perms: dict[str, Perm] = {}
    for resource, text in table.items():
        at = f"{where}: {name}.{resource}"
        if resource.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)):
            raise InvalidArgumentError(
                f"{at}: retry and dead-letter topics are their group's; name the group in "
                "group_perms"
            )
        try:
            validate(resource)
        except InvalidArgumentError as exc:
            raise InvalidArgumentError(f"{at}: {exc}") from None
        perms[resource] = parse_perm(text, at)
    return perms
