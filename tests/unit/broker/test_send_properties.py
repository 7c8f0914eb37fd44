"""What a send stores as the message's properties: the string as sent plus the broker's
cluster, whether the send takes the path that appends to that string or the one that decodes
it (a delay, a client-set cluster, a dead letter)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconsume.broker.context import BrokerContext
from reconsume.broker.send import SendProcessor
from reconsume.broker.settings import BrokerSettings
from reconsume.message import properties as props
from reconsume.message.address import HostAddress
from reconsume.message.decode import decode_record
from reconsume.message.names import SCHEDULE_TOPIC
from reconsume.store import MessageStore
from reconsume.store.settings import FlushMode, StoreSettings
from reconsume.wire.broker_headers import SendMessageRequestHeaderV2
from reconsume.wire.codes import RequestCode, ResponseCode
from reconsume.wire.command import RemotingCommand

TOPIC = "PropertiesTopic"


class _Peer:
    """The two attributes of a connection a send reads."""

    peer = "127.0.0.1:40000"

    def __init__(self) -> None:
        self.attributes: dict[str, object] = {}


@pytest.fixture
def processor(tmp_path: Path) -> Iterator[SendProcessor]:
    settings = BrokerSettings(store_dir=str(tmp_path), flush_mode=FlushMode.ASYNC)
    store = MessageStore(
        tmp_path,
        StoreSettings(flush_mode=FlushMode.ASYNC, commit_log_segment_bytes=8 << 20),
        background=False,
    )
    try:
        context = BrokerContext(settings, store, HostAddress.parse("127.0.0.1:10911"), lambda: None)
        context.prepare_default_topic()
        yield SendProcessor(context)
    finally:
        store.close()


def send(processor: SendProcessor, properties: str) -> RemotingCommand:
    header = SendMessageRequestHeaderV2(
        producer_group="producer", topic=TOPIC, default_topic="TBW102",
        default_topic_queue_nums=1, queue_id=0, sys_flag=0,
        born_timestamp=int(time.time() * 1000), flag=0, properties=properties,
        reconsume_times=0, batch=False,
    )  # fmt: skip
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header.to_ext_fields(), b"x")
    response = processor.send(request, _Peer())  # type: ignore[arg-type]
    assert isinstance(response, RemotingCommand)
    assert response.code == ResponseCode.SUCCESS, response.remark
    return response


def stored_record(processor: SendProcessor, topic: str = TOPIC) -> bytes:
    store = processor.context.store
    queue_id = 0
    if topic == SCHEDULE_TOPIC:
        queue_id = next(q for (t, q) in store.queues.queues if t == topic)
    result = store.get_messages(topic, queue_id, 0, max_count=1)
    (record,) = result.records
    return bytes(record)


def stored_properties(processor: SendProcessor, topic: str = TOPIC) -> dict[str, str]:
    return decode_record(stored_record(processor, topic)).properties


@pytest.mark.parametrize(
    ("sent", "expected"),
    [
        ("", {"CLUSTER": "DefaultCluster"}),
        (
            "TAGS\x01a\x02UNIQ_KEY\x01K1\x02",
            {"TAGS": "a", "UNIQ_KEY": "K1", "CLUSTER": "DefaultCluster"},
        ),
        # Some clients leave out the last separator.
        ("TAGS\x01a", {"TAGS": "a", "CLUSTER": "DefaultCluster"}),
    ],
    ids=["none", "terminated", "unterminated"],
)
def test_plain_send_appends_the_cluster_to_the_string_as_sent(
    processor: SendProcessor, sent: str, expected: dict[str, str]
) -> None:
    send(processor, sent)
    assert stored_properties(processor) == expected
    assert stored_record(processor).count(b"CLUSTER\x01") == 1


def test_a_cluster_set_by_the_client_is_replaced_not_repeated(processor: SendProcessor) -> None:
    send(processor, "CLUSTER\x01theirs\x02TAGS\x01a\x02")
    assert stored_properties(processor) == {"CLUSTER": "DefaultCluster", "TAGS": "a"}
    assert stored_record(processor).count(b"CLUSTER\x01") == 1


def test_a_delayed_send_is_decoded_and_routed_to_the_schedule_topic(
    processor: SendProcessor,
) -> None:
    send(processor, "TAGS\x01a\x02DELAY\x012\x02")
    stored = stored_properties(processor, SCHEDULE_TOPIC)
    assert stored[props.REAL_TOPIC] == TOPIC
    assert stored[props.CLUSTER] == "DefaultCluster"
