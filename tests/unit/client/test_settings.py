"""ConsumerSettings: refused values fail when the settings are made, and the reconsume limit
in force follows RocketMQ's defaults."""

from __future__ import annotations

import re
from typing import Any

import pytest

from reconsume.client.push import PushConsumer
from reconsume.client.settings import (
    DEFAULT_MAX_RECONSUME_TIMES,
    DEFAULT_SETTINGS,
    ORDERLY_UNLIMITED,
    ConsumerSettings,
)
from reconsume.errors import InvalidArgumentError


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"batch_size": 0}, "batch_size must be in 1..1024, not 0"),
        ({"batch_size": 1025}, "batch_size must be in 1..1024, not 1025"),
        ({"pull_batch_size": 0}, "pull_batch_size must be in 1..1024, not 0"),
        ({"concurrency": 0}, "concurrency and max_held_per_queue must be >= 1"),
        ({"max_held_per_queue": 0}, "concurrency and max_held_per_queue must be >= 1"),
        ({"local_retry_delay_s": -0.1}, "local_retry_delay_s must be >= 0"),
    ],
)
def test_refused_values_name_the_setting(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=re.escape(message)):
        ConsumerSettings(**changes)


def test_the_bounds_themselves_are_accepted() -> None:
    ConsumerSettings(batch_size=1024, pull_batch_size=1, concurrency=1, local_retry_delay_s=0)


@pytest.mark.parametrize(
    ("max_reconsume_times", "orderly", "limit"),
    [
        (-1, False, DEFAULT_MAX_RECONSUME_TIMES),
        (-1, True, ORDERLY_UNLIMITED),
        (0, False, 0),
        (3, True, 3),
    ],
)
def test_reconsume_limit(max_reconsume_times: int, orderly: bool, limit: int) -> None:
    settings = ConsumerSettings(max_reconsume_times=max_reconsume_times)
    assert settings.reconsume_limit(orderly) == limit


def test_a_consumer_given_no_settings_has_the_defaults() -> None:
    consumer = PushConsumer(["127.0.0.1:9876"], "g")
    assert consumer.settings == ConsumerSettings() == DEFAULT_SETTINGS


def test_the_instance_name_names_the_client() -> None:
    settings = ConsumerSettings(instance_name="named")
    consumer = PushConsumer(["127.0.0.1:9876"], "g", settings=settings)
    assert consumer.client_id.endswith("@named")
