"""The side-by-side's produce case alone, against reconsume only: for before/after runs of one
change, alternating checkouts on ``PYTHONPATH``, where the whole side-by-side would take
minutes per run. A fresh name server and broker (``--replicated``: a master and one Sync
replica, ``bench.servers.replicated_servers``), the load generator's ``setup``, then its
``produce`` with ``--threads`` for ``--seconds`` after 2 unmeasured; prints one JSON line: the
load generator's figures and the CPU time a send of the broker (and of the replica)::

    PYTHONPATH=<checkout>:<checkout>/broker_image \
        python -m bench.produce_case --threads 1 --replicated
"""

from __future__ import annotations

import argparse
import json
import tempfile
from contextlib import AbstractContextManager
from pathlib import Path

from bench.common import warn_if_plain_interpreter
from bench.compare_rocketmq import RETRY_GROUP, TOPICS, _loadgen
from bench.rocketmq_servers import DELAY_LEVELS
from bench.servers import Running, cpu_seconds, replicated_servers, servers


def run(threads: int, flush: str, replicated: bool, seconds: int, root: Path) -> dict[str, object]:
    started: AbstractContextManager[Running]
    setup = ["setup", "--topics", ",".join(TOPICS), "--queues", "8"]
    setup += ["--retry-groups", RETRY_GROUP, "--probe-topic", TOPICS[0]]
    if replicated:
        started = replicated_servers(root / "data", flush, "--delay-levels", DELAY_LEVELS)
        setup += ["--replicas", "2"]
    else:
        started = servers(root / "data", flush, "--delay-levels", DELAY_LEVELS)
    with started as running:
        _loadgen(setup, running, root / "logs")
        broker_before = cpu_seconds(running.broker.pid)
        replicas_before = sum(cpu_seconds(replica.pid) for replica in running.replicas)
        result = _loadgen(
            ["produce", "--topic", TOPICS[1], "--threads", str(threads),
             "--seconds", str(seconds), "--warmup-seconds", "2"],
            running, root / "logs",
        )  # fmt: skip
        sent = result["sent_total"]
        broker = cpu_seconds(running.broker.pid) - broker_before
        replicas = sum(cpu_seconds(replica.pid) for replica in running.replicas) - replicas_before
    result.pop("latencies", None)
    result["broker_cpu_us_per_send"] = round(broker / sent * 1e6, 1)
    if replicated:
        result["replica_cpu_us_per_send"] = round(replicas / sent * 1e6, 1)
    return result


def main() -> None:
    warn_if_plain_interpreter()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--flush", choices=("Async", "Sync"), default="Async")
    parser.add_argument("--replicated", action="store_true")
    parser.add_argument("--seconds", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="produce-case-") as root:
        result = run(args.threads, args.flush, args.replicated, args.seconds, Path(root))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
