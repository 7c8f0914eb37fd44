"""A master's answer with a garbled number ends the replica's connection with a
ReplicationError (the follower reconnects), never the follower itself."""

from __future__ import annotations

import pytest

from reconsume.broker.replica_exchange import field_number
from reconsume.errors import ReplicationError


def test_numbers_of_an_answer_are_read_or_refused() -> None:
    assert field_number({"epoch": "7"}, "epoch", 0) == 7
    assert field_number({}, "readLimit", -1) == -1
    with pytest.raises(ReplicationError, match="readLimit='12x', not a number"):
        field_number({"readLimit": "12x"}, "readLimit", -1)
