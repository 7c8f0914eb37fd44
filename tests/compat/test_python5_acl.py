"""Apache RocketMQ's Python client 5.x against a broker with access control on and a gRPC
service: the client's own credentials (``Credentials(ak, sk)``, an HMAC-SHA1 of each call's
``x-mq-date-time``) are checked against the broker's ACL file as a 4.x client's signatures
are. The application's account sends, receives and acknowledges; an account without PUB is
refused FORBIDDEN and stores nothing; no credentials or a wrong secret key are refused
UNAUTHORIZED; each refusal is counted by reason in ``/metrics``."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator

import grpc
import pytest

from reconsume.wire.signing import Credentials
from reconsume.wire.v2 import definition_pb2 as pb
from reconsume.wire.v2 import service_pb2 as spb

from .acl_support import APP, FORGED, GROUPS, READER, TOPICS, acl_cluster, broker_of, refusals
from .servers import Cluster

TOPIC = TOPICS[0]
GROUP = GROUPS[0]
CLIENT = r"""
import json, sys
from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer
from rocketmq import SimpleConsumer

endpoints, topic, group, ak, sk = sys.argv[1:6]
config = ClientConfiguration(endpoints, Credentials(ak, sk), request_timeout=5)
producer = Producer(config, (topic,))
try:
    producer.startup()
    message = Message()
    message.topic = topic
    message.body = b"signed"
    receipt = producer.send(message)
    print(json.dumps({"sent": receipt.message_id}), flush=True)
except Exception as exc:
    print(json.dumps({"refused": str(exc)}), flush=True)
    sys.exit(0)
finally:
    producer.shutdown()
consumer = SimpleConsumer(config, group, {topic: FilterExpression("*")}, await_duration=2)
consumer.startup()
try:
    for _ in range(10):
        for m in consumer.receive(16, 10):
            consumer.ack(m)
            print(json.dumps({"acked": m.message_id}), flush=True)
            sys.exit(0)
finally:
    consumer.shutdown()
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, str]]:
    with acl_cluster(tmp_path_factory.mktemp("acl5"), ("--grpc-listen", "127.0.0.1:0")) as c:
        match = re.search(r"serving gRPC on (\S+)", "".join(broker_of(c).output))
        assert match is not None
        yield c, match.group(1)


def _run(endpoint: str, credentials: Credentials | None) -> list[dict[str, str]]:
    ak, sk = (credentials.access_key, credentials.secret_key) if credentials else ("", "")
    done = subprocess.run(
        [sys.executable, "-c", CLIENT, endpoint, TOPIC, GROUP, ak, sk],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_the_applications_account_sends_receives_and_acknowledges(
    cluster: tuple[Cluster, str],
) -> None:
    servers, endpoint = cluster
    before = refusals(servers)
    events = _run(endpoint, APP)
    sent = [e["sent"] for e in events if "sent" in e]
    assert len(sent) == 1, events
    assert [e["acked"] for e in events if "acked" in e] == sent
    assert refusals(servers) == before


@pytest.mark.parametrize(
    ("credentials", "reason"),
    [
        pytest.param(READER, "no_permission", id="no-pub"),
        pytest.param(None, "unsigned", id="unsigned"),
        pytest.param(FORGED, "bad_signature", id="wrong-secret"),
    ],
)
def test_a_client_without_the_right_credentials_is_refused_and_counted(
    cluster: tuple[Cluster, str], credentials: Credentials | None, reason: str
) -> None:
    servers, endpoint = cluster
    before = refusals(servers)
    events = _run(endpoint, credentials)
    assert [e for e in events if "refused" in e], events
    assert not [e for e in events if "sent" in e]
    after = refusals(servers)
    assert after[reason] > before[reason], (before, after, events)


def _signed(credentials: Credentials | None) -> tuple[tuple[str, str], ...]:
    if credentials is None:
        return ()
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    signature = hmac.new(credentials.secret_key.encode(), stamp.encode(), hashlib.sha1)
    return (
        ("x-mq-date-time", stamp),
        ("authorization", f"MQv2-HMAC-SHA1 Credential={credentials.access_key}, "
                          f"SignedHeaders=x-mq-date-time, Signature={signature.hexdigest()}"),
    )  # fmt: skip


@pytest.mark.parametrize(
    ("credentials", "code", "says"),
    [
        pytest.param(None, pb.UNAUTHORIZED, "carries no credential", id="unsigned"),
        pytest.param(FORGED, pb.UNAUTHORIZED, "signature check failed", id="wrong-secret"),
        pytest.param(READER, pb.FORBIDDEN, f"{READER.access_key} has no PUB", id="no-pub"),
    ],
)
def test_refusals_answer_the_protocols_codes(
    cluster: tuple[Cluster, str], credentials: Credentials | None, code: int, says: str
) -> None:
    _servers, endpoint = cluster
    message = pb.Message(
        topic=pb.Resource(name=TOPIC),
        body=b"x",
        system_properties=pb.SystemProperties(message_id="m-1", message_type=pb.NORMAL),
    )
    with grpc.insecure_channel(endpoint) as channel:
        send = channel.unary_unary(
            "/apache.rocketmq.v2.MessagingService/SendMessage",
            request_serializer=spb.SendMessageRequest.SerializeToString,
            response_deserializer=spb.SendMessageResponse.FromString,
        )
        response = send(spb.SendMessageRequest(messages=[message]), metadata=_signed(credentials))
    assert response.status.code == code
    assert says in response.status.message
