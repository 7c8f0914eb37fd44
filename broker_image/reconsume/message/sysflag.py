"""Bits of a record's ``sysFlag`` field (RocketMQ ``MessageSysFlag``)."""

from __future__ import annotations

COMPRESSED = 0x1
MULTI_TAGS = 0x2
TRANSACTION_NOT_TYPE = 0x0
TRANSACTION_PREPARED_TYPE = 0x1 << 2
TRANSACTION_COMMIT_TYPE = 0x2 << 2
TRANSACTION_ROLLBACK_TYPE = 0x3 << 2
TRANSACTION_MASK = 0x3 << 2
BORNHOST_V6 = 0x1 << 4
STOREHOST_V6 = 0x1 << 5
HOST_V6_MASK = BORNHOST_V6 | STOREHOST_V6


def transaction_type(sys_flag: int) -> int:
    """The transaction bits of a sysFlag (one of the TRANSACTION_*_TYPE values)."""
    return sys_flag & TRANSACTION_MASK
