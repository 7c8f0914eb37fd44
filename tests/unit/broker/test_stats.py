"""The counters send and pull keep for /metrics."""

from __future__ import annotations

from reconsume.broker.stats import BrokerStats, pull_result
from reconsume.wire.codes import ResponseCode


def test_sends_count_messages_and_body_bytes_per_topic() -> None:
    stats = BrokerStats()
    stats.stored("orders", 1, 10)
    stats.stored("orders", 3, 30)
    stats.stored("audit", 1, 5)
    assert stats.messages_in == {"orders": 4, "audit": 1}
    assert stats.bytes_in == {"orders": 40, "audit": 5}


def test_pulls_count_results_and_delivered_messages() -> None:
    stats = BrokerStats()
    stats.pulled(ResponseCode.SUCCESS)
    stats.delivered("orders", "g", 7)
    stats.pulled(ResponseCode.PULL_NOT_FOUND)
    stats.pulled(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST)
    stats.delivered("orders", "g", 2)
    assert stats.pulls == {"found": 1, "not_found": 1, "refused": 1}
    assert stats.messages_out == {("orders", "g"): 9}


def test_pull_results_are_a_fixed_set() -> None:
    results = {pull_result(code) for code in ResponseCode}
    assert results == {"found", "not_found", "retry_immediately", "offset_moved", "refused"}
