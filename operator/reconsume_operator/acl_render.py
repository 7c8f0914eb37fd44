"""A BrokerCluster's ACL file as the operator writes it, from its admin account, its Users and
what its Topics and ConsumerGroups grant them; pure functions.

The file is :mod:`reconsume.access.acl`'s TOML, rendered deterministically (accounts sorted by
access key, tables by name), so the same resources give the same bytes and the same digest:
the operator writes the ``<cluster>-acl`` Secret only when the digest changes, and a broker's
reported digest says whether it has loaded the current file.

Permissions of one User add up: its own ``spec.topics``/``spec.groups``, ``PUB`` on each Topic
naming it in ``spec.producers``, ``SUB`` on each Topic naming it in ``spec.consumers``, and on
each ConsumerGroup naming it in ``spec.consumers`` (and the topics it subscribes to). An
explicit ``DENY`` in the User's own spec wins over a grant.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from reconsume.access.acl import acl_digest as file_digest
from reconsume.access.perms import Perm
from reconsume.topology.clusters import ClusterSpec
from reconsume_operator.naming import meta

ACL_FILE = "acl.toml"
"""The key of the ACL Secret, and the file's name where it is mounted."""

_PERM_TEXT = {
    Perm.DENY: "DENY",
    Perm.PUB: "PUB",
    Perm.SUB: "SUB",
    Perm.PUB | Perm.SUB: "PUB|SUB",
}
_TEXT_PERM = {text: perm for perm, text in _PERM_TEXT.items()}
NONE = Perm(0)
"""No grant yet (``DENY`` is a bit of its own in RocketMQ's permissions)."""


def perm_of(text: str) -> Perm:
    """A permission as the CRDs spell it (``DENY``, ``PUB``, ``SUB``, ``PUB|SUB``)."""
    return _TEXT_PERM[text]


@dataclass(frozen=True)
class AccountEntry:
    """One account of the rendered file. ``owner`` names where it comes from (a comment)."""

    access_key: str
    secret_key: str = field(repr=False)
    owner: str
    admin: bool = False
    default_topic_perm: Perm = Perm.DENY
    default_group_perm: Perm = Perm.DENY
    topic_perms: Mapping[str, Perm] = field(default_factory=dict)
    group_perms: Mapping[str, Perm] = field(default_factory=dict)
    white_remote_address: str | None = None


@dataclass
class Grants:
    """What Topics and ConsumerGroups grant each User (by User name)."""

    topics: dict[str, dict[str, Perm]] = field(default_factory=dict)
    groups: dict[str, dict[str, Perm]] = field(default_factory=dict)

    def grant_topic(self, user: str, topic: str, perm: Perm) -> None:
        held = self.topics.setdefault(user, {})
        held[topic] = held.get(topic, NONE) | perm

    def grant_group(self, user: str, group: str, perm: Perm) -> None:
        held = self.groups.setdefault(user, {})
        held[group] = held.get(group, NONE) | perm


def grants(topics: Iterable[Mapping[str, Any]], groups: Iterable[Mapping[str, Any]]) -> Grants:
    """The grants of Topic and ConsumerGroup objects (of one cluster) to Users."""
    found = Grants()
    for topic in topics:
        spec = topic.get("spec") or {}
        name = str(spec.get("topicName") or topic["metadata"]["name"])
        for user in spec.get("producers") or ():
            found.grant_topic(str(user), name, Perm.PUB)
        for user in spec.get("consumers") or ():
            found.grant_topic(str(user), name, Perm.SUB)
    for group in groups:
        spec = group.get("spec") or {}
        name = str(spec.get("groupName") or group["metadata"]["name"])
        for user in spec.get("consumers") or ():
            found.grant_group(str(user), name, Perm.SUB)
            for subscription in spec.get("subscriptions") or ():
                found.grant_topic(str(user), str(subscription["topic"]), Perm.SUB)
    return found


def _merged(own: Mapping[str, Perm], granted: Mapping[str, Perm]) -> dict[str, Perm]:
    merged = dict(granted)
    for name, perm in own.items():
        merged[name] = perm if perm is Perm.DENY else merged.get(name, NONE) | perm
    return merged


def user_entries(
    user: Mapping[str, Any], keys: Iterable[tuple[str, str]], found: Grants
) -> list[AccountEntry]:
    """The accounts of a User object: one per key pair it holds (two during a rotation), with
    its permissions and what ``found`` grants it."""
    name = str(user["metadata"]["name"])
    spec = user.get("spec") or {}
    own_topics = {str(t["name"]): perm_of(str(t["perm"])) for t in spec.get("topics") or ()}
    own_groups = {str(g["name"]): perm_of(str(g["perm"])) for g in spec.get("groups") or ()}
    topic_perms = _merged(own_topics, found.topics.get(name, {}))
    group_perms = _merged(own_groups, found.groups.get(name, {}))
    return [
        AccountEntry(
            access_key=access_key,
            secret_key=secret_key,
            owner=f"User {name}",
            admin=bool(spec.get("admin", False)),
            default_topic_perm=perm_of(str(spec.get("defaultTopicPerm") or "DENY")),
            default_group_perm=perm_of(str(spec.get("defaultGroupPerm") or "DENY")),
            topic_perms=topic_perms,
            group_perms=group_perms,
            white_remote_address=spec.get("allowedAddress") or None,
        )
        for access_key, secret_key in keys
    ]


def _string(text: str) -> str:
    """A TOML basic string: backslash, quote and control characters escaped, the rest as it
    is (the file is UTF-8; an escaped character beyond the BMP would need ``\\U``)."""
    escaped = "".join(
        f"\\u{ord(c):04x}" if ord(c) < 0x20 or ord(c) == 0x7F else c
        for c in text.replace("\\", "\\\\").replace('"', '\\"')
    )
    return f'"{escaped}"'


def _table(perms: Mapping[str, Perm]) -> str:
    items = ", ".join(f"{_string(k)} = {_string(_PERM_TEXT[perms[k]])}" for k in sorted(perms))
    return "{ " + items + " }" if items else "{}"


def render_acl(entries: Iterable[AccountEntry], allowed_addresses: Iterable[str] = ()) -> str:
    """The ACL file (TOML) of ``entries``; the first entry of an access key given twice wins
    (the callers put the admin account first)."""
    seen: dict[str, AccountEntry] = {}
    for entry in entries:
        seen.setdefault(entry.access_key, entry)
    lines = [
        "# Written by reconsume-operator from the BrokerCluster, its Users, Topics and",
        "# ConsumerGroups; edits are overwritten.",
        "global_white_remote_addresses = ["
        + ", ".join(_string(a) for a in allowed_addresses)
        + "]",
    ]
    for key in sorted(seen):
        entry = seen[key]
        lines += [
            "",
            f"# {' '.join(entry.owner.split())}",
            "[[accounts]]",
            f"access_key = {_string(entry.access_key)}",
            f"secret_key = {_string(entry.secret_key)}",
            f"admin = {'true' if entry.admin else 'false'}",
            f"default_topic_perm = {_string(_PERM_TEXT[entry.default_topic_perm])}",
            f"default_group_perm = {_string(_PERM_TEXT[entry.default_group_perm])}",
            f"topic_perms = {_table(entry.topic_perms)}",
            f"group_perms = {_table(entry.group_perms)}",
        ]
        if entry.white_remote_address:
            lines.append(f"white_remote_address = {_string(entry.white_remote_address)}")
    return "\n".join(lines) + "\n"


def acl_digest(text: str) -> str:
    """What a broker reports of the ACL file it loaded (``aclDigest``), computed as the broker
    does (:func:`reconsume.access.acl.acl_digest`)."""
    return file_digest(text.encode())


def acl_secret_name(cluster: str) -> str:
    return f"{cluster}-acl"


def acl_secret(spec: ClusterSpec, text: str) -> dict[str, Any]:
    """The Secret holding the cluster's ACL file (owned by the BrokerCluster)."""
    metadata = meta(acl_secret_name(spec.name), spec, "acl")
    metadata["annotations"] = {"reconsume.io/acl-digest": acl_digest(text)}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": metadata,
        "type": "Opaque",
        "data": {ACL_FILE: base64.b64encode(text.encode()).decode()},
    }
