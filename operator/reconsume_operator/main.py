"""``reconsume operator`` / ``reconsume-operator``: run the operator (wrapping ``kopf.run``)
for some namespaces or the whole cluster."""

from __future__ import annotations

import argparse
import dataclasses
import os
import secrets
import sys
from collections.abc import Sequence

import kopf

from reconsume_operator.config import OperatorConfig
from reconsume_operator.registration import register


def build_parser(prog: str = "reconsume operator") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Reconcile BrokerClusters, ConsumerGroups and Topics (reconsume.io).",
    )
    scope = parser.add_mutually_exclusive_group(required=True)
    scope.add_argument(
        "-n", "--namespace", action="append", dest="namespaces", metavar="NS",
        help="watch this namespace (repeatable; Kopf's glob patterns allowed)",
    )  # fmt: skip
    scope.add_argument("-A", "--all-namespaces", action="store_true", help="watch every namespace")
    parser.add_argument(
        "--metrics-port",
        type=int,
        help="port of /metrics (default 9090, env RECONSUME_METRICS_PORT)",
    )
    parser.add_argument("--no-metrics", action="store_true", help="serve no /metrics endpoint")
    parser.add_argument(
        "--liveness-port", type=int, default=8080,
        help="port of the liveness endpoint /healthz (default 8080; 0: none)",
    )  # fmt: skip
    parser.add_argument(
        "--drift-seconds", type=float,
        help="seconds between drift checks (default 60, env RECONSUME_DRIFT_SECONDS)",
    )  # fmt: skip
    parser.add_argument(
        "--deletion-timeout", type=float, metavar="SECONDS",
        help="seconds a deletion waits for name servers that do not answer before it leaves "
        "the group or topic on the brokers (default 600, env RECONSUME_DELETION_TIMEOUT_SECONDS)",
    )  # fmt: skip
    parser.add_argument(
        "--standalone", action="store_true",
        help="run without peering (one replica only; no kopf.dev peering CRDs needed)",
    )  # fmt: skip
    parser.add_argument(
        "--peering", help="name of the (Cluster)KopfPeering object (default reconsume)"
    )
    parser.add_argument(
        "--priority", type=priority, metavar="N|random",
        help="peering priority: the highest-priority replica acts; 'random' picks one at "
        "startup, so replicas of one Deployment differ (env RECONSUME_PEERING_PRIORITY)",
    )  # fmt: skip
    parser.add_argument(
        "--peering-lifetime", type=int, metavar="SECONDS",
        help="seconds after its last keep-alive that a silent replica is presumed gone "
        "(default 60, env RECONSUME_PEERING_LIFETIME_SECONDS)",
    )  # fmt: skip
    parser.add_argument("-v", "--verbose", action="store_true", help="log at debug level")
    return parser


def priority(text: str) -> int:
    """A peering priority: an integer, or ``random`` for a random one in [1, 2**31 - 1].

    Kopf pauses every replica when two of the highest priority are alive, so replicas started
    from one pod template (a Deployment) must not share one: with ``random`` two replicas
    collide with a probability of about 1 in 2**31."""
    if text.strip().lower() == "random":
        return secrets.randbelow(2**31 - 1) + 1
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer or 'random': {text!r}") from None


def config_from_args(args: argparse.Namespace) -> OperatorConfig:
    config = OperatorConfig.from_env()
    changes: dict[str, object] = {"standalone": bool(args.standalone)}
    if args.metrics_port is not None:
        changes["metrics_port"] = args.metrics_port
    if args.no_metrics:
        changes["metrics_port"] = None
    changes["liveness_port"] = args.liveness_port or None
    if args.drift_seconds is not None:
        changes["drift_interval_s"] = args.drift_seconds
    if args.deletion_timeout is not None:
        changes["deletion_timeout_s"] = args.deletion_timeout
    if args.peering:
        changes["peering_name"] = args.peering
    if args.peering_lifetime is not None:
        changes["peering_lifetime_s"] = args.peering_lifetime
    changes["namespaces"] = tuple(args.namespaces or ())
    return dataclasses.replace(config, **changes)  # type: ignore[arg-type]


def peering_priority(args: argparse.Namespace) -> int | None:
    """``--priority``, else ``RECONSUME_PEERING_PRIORITY``, else Kopf's default (0)."""
    if args.priority is not None:
        return int(args.priority)
    from_env = os.environ.get("RECONSUME_PEERING_PRIORITY", "").strip()
    return priority(from_env) if from_env else None


def liveness_endpoint(port: int | None, pod_ip: str) -> str | None:
    """Kopf's probe URL: on every interface of the pod's IP family (``POD_IP``, from the
    downward API). Kopf listens on its URL's host alone, and ``::`` would be IPv6 only, so the
    kubelet's probe of an IPv4 pod would find nothing; ``0.0.0.0`` likewise on IPv6 pods."""
    if not port:
        return None
    host = "[::]" if ":" in pod_ip else "0.0.0.0"
    return f"http://{host}:{port}/healthz"


def main(argv: Sequence[str] | None = None, prog: str = "reconsume-operator") -> int:
    args = build_parser(prog).parse_args(argv)
    try:
        config = config_from_args(args)
    except ValueError as exc:
        print(f"{prog}: invalid setting: {exc}", file=sys.stderr)
        return 2
    kopf.configure(verbose=args.verbose)
    registry = kopf.OperatorRegistry()
    register(registry, config)
    liveness = liveness_endpoint(config.liveness_port, os.environ.get("POD_IP", ""))
    kopf.run(
        registry=registry,
        clusterwide=bool(args.all_namespaces),
        namespaces=args.namespaces or (),
        standalone=True if config.standalone else None,
        priority=peering_priority(args),
        liveness_endpoint=liveness,
    )
    return 0
