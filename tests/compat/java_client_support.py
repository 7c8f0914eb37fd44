"""Running the Java client driver (``java/``, Apache RocketMQ's rocketmq-client 4.9.8) against
a :mod:`tests.compat.servers` cluster (its events read by :mod:`.driver_support`), and checking
the requests and responses it reports."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from reconsume.message.names import RETRY_GROUP_TOPIC_PREFIX
from reconsume.wire.codes import RequestCode, ResponseCode

from .conftest import JavaClient
from .driver_support import DRIVER_TIMEOUT_S, DriverRun, run_to_end, scenario_args
from .servers import Cluster

CONSUMING = frozenset(
    {
        RequestCode.GET_ROUTEINFO_BY_TOPIC,
        RequestCode.HEART_BEAT,
        RequestCode.GET_CONSUMER_LIST_BY_GROUP,
        RequestCode.QUERY_CONSUMER_OFFSET,
        RequestCode.PULL_MESSAGE,
        RequestCode.UPDATE_CONSUMER_OFFSET,
        RequestCode.SEND_MESSAGE_V2,
        RequestCode.UNREGISTER_CLIENT,
    }
)
"""Requests a producer and a clustering push consumer make in every scenario."""


def run_driver(
    java_client: JavaClient,
    cluster: Cluster,
    scenario: str,
    state_dir: Path,
    **options: object,
) -> DriverRun:
    """Run one scenario to its end (``options`` become ``--name=value``, ``_`` as ``-``) and
    assert it finished: exit 0 after its "done" event."""
    return run_driver_at(java_client, cluster.namesrv.address, scenario, state_dir, **options)


def run_driver_at(
    java_client: JavaClient,
    namesrv: str,
    scenario: str,
    state_dir: Path,
    timeout_s: float = DRIVER_TIMEOUT_S,
    **options: object,
) -> DriverRun:
    """:func:`run_driver` against the name server(s) at ``namesrv``; the driver gives up
    after ``timeout_s`` - 10 s."""
    args = scenario_args(namesrv, timeout_s, options)
    command = java_client.command(scenario, *args, state_dir=state_dir)
    return run_to_end(command, "Java", timeout_s, lambda: client_log(state_dir))


def client_log(state_dir: Path) -> str:
    """The warnings and errors of the client's own log."""
    log_file = state_dir / "logs" / "rocketmq_client.log"
    if not log_file.is_file():
        return ""
    lines = log_file.read_text(errors="replace").splitlines()
    return "\n".join(line for line in lines if " WARN " in line or " ERROR " in line)


def check_protocol(run: DriverRun, exercised: Iterable[int], created: Iterable[str] = ()) -> None:
    """The clients made (or, from the brokers, received) every request in ``exercised``, and
    each answer they waited for was SUCCESS, but for

    * the name server's TOPIC_NOT_EXIST for a topic no broker had yet when the client asked:
      the group's retry topic (a consumer asks before the brokers create it, as with RocketMQ's)
      or one of ``created``;
    * SYSTEM_ERROR "no consumer for this group" answering a consumer list asked of a broker the
      consumer had not yet heartbeated to, or had already unregistered from: a rebalance that
      another broker's NOTIFY_CONSUMER_IDS_CHANGED started while the client was starting or
      closing (RocketMQ's broker notifies, and answers, so too).
    """
    made = {e["code"] for e in run["request"]}
    assert made >= set(exercised), {RequestCode(c).name for c in set(exercised) - made}
    not_yet = (RETRY_GROUP_TOPIC_PREFIX, *created)
    registered: set[tuple[str, str]] = set()
    """(client, broker): a heartbeat of the client was answered by the broker."""
    left: set[tuple[str, str]] = set()
    """(client, broker): the client asked the broker to unregister it (a heartbeat racing
    that carries no consumer any more)."""
    unexpected = []
    for e in run.sequence:
        if e["event"] == "request" and e["code"] == RequestCode.UNREGISTER_CLIENT:
            left.add((e["client"], e["remote"]))
        if e["event"] != "response":
            continue
        answer = (e["code"], e["responseCode"])
        if answer == (RequestCode.HEART_BEAT, ResponseCode.SUCCESS):
            registered.add((e["client"], e["remote"]))
        if e["responseCode"] in (None, ResponseCode.SUCCESS):
            continue
        if answer == (RequestCode.GET_ROUTEINFO_BY_TOPIC, ResponseCode.TOPIC_NOT_EXIST) and any(
            f"topic: {topic}" in e["remark"] for topic in not_yet
        ):
            continue
        if (
            answer == (RequestCode.GET_CONSUMER_LIST_BY_GROUP, ResponseCode.SYSTEM_ERROR)
            and e["remark"].startswith("no consumer for this group")
            and ((e["client"], e["remote"]) not in registered or (e["client"], e["remote"]) in left)
        ):
            continue
        unexpected.append(e)
    assert not unexpected, (unexpected, run.context(unexpected[0]) if unexpected else [])
