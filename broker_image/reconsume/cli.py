"""The ``reconsume`` command line."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from reconsume import __version__
from reconsume.flags import add_flags, given_settings

if TYPE_CHECKING:
    from reconsume.broker.settings import BrokerSettings


def _crash_demo(args: argparse.Namespace) -> int:
    from reconsume.demo.crash import run_demo

    if args.dir is not None:
        args.dir.mkdir(parents=True, exist_ok=True)
        return run_demo(args.dir, args.rounds, sys.stdout)
    with tempfile.TemporaryDirectory(prefix="reconsume-demo-") as tmp:
        return run_demo(Path(tmp), args.rounds, sys.stdout)


def _embedded_logging(verbose: bool) -> None:
    """Embedded mode tells what it does (INFO), with the time, like a controller's log."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))
    embedded = logging.getLogger("reconsume.embedded")
    embedded.addHandler(handler)
    embedded.setLevel(logging.DEBUG if verbose else logging.INFO)
    embedded.propagate = False


def _up(args: argparse.Namespace) -> int:
    import asyncio

    from reconsume.embedded import up

    _embedded_logging(args.verbose)
    return asyncio.run(
        up.run(
            args.data_dir,
            args.filename,
            recursive=args.recursive,
            namesrv_port=args.port,
            interval_s=args.interval,
        )
    )


def _status(args: argparse.Namespace) -> int:
    from reconsume.embedded import status

    return status.main(args.data_dir, sys.stdout, as_json=args.json)


def _demo(args: argparse.Namespace) -> int:
    from reconsume.demo.run import main as demo_main

    if args.verbose:
        _embedded_logging(verbose=True)
    return demo_main(args.dir, fast=args.fast, out=sys.stdout)


def _store_inspect(args: argparse.Namespace) -> int:
    from reconsume.errors import ReconsumeError
    from reconsume.store.store import MessageStore
    from reconsume.store.tools import describe

    if not (args.dir / "commitlog").is_dir():
        print(f"reconsume: {args.dir} holds no message store (no commitlog/)", file=sys.stderr)
        return 2
    try:
        with MessageStore(args.dir, background=False) as store:
            summary = describe(store)
    except ReconsumeError as exc:
        print(f"reconsume: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    log = summary["commitLog"]
    rec = summary["recovery"]
    print(f"store {summary['root']}")
    print(
        f"  commit log: offsets {log['minOffset']}..{log['maxOffset']} "
        f"in {log['segments']} segment(s), {log['bytes']} bytes"
    )
    print(
        f"  recovery: {rec['recordsScanned']} records scanned from {rec['scanStart']} in "
        f"{rec['seconds']:.3f}s, clean shutdown: {rec['cleanShutdown']}"
    )
    if rec["truncatedAt"] is not None:
        print(f"  truncated at {rec['truncatedAt']}: {rec['truncatedReason']}")
        for path in rec["quarantined"]:
            print(f"    set aside: {path}")
    for queue in summary["queues"]:
        depth = queue["max"] - queue["min"]
        print(f"  {queue['topic']}/{queue['queueId']}: {queue['min']}..{queue['max']} ({depth})")
    return 0


def _namesrv(args: argparse.Namespace) -> int:
    from reconsume.errors import InvalidArgumentError, ReconsumeError
    from reconsume.namesrv import NameServer, NamesrvSettings
    from reconsume.runtime import run_until_signalled
    from reconsume.wire.listen import listen_text

    try:
        settings = NamesrvSettings(**given_settings(NamesrvSettings, args))
    except InvalidArgumentError as exc:
        print(f"reconsume namesrv: invalid setting: {exc}", file=sys.stderr)
        return 2
    server = NameServer(settings)

    async def start() -> str:
        port = await server.start()
        return listen_text(settings.listen_host, port)

    try:
        return run_until_signalled(start, server.stop, "reconsume namesrv")
    except ReconsumeError as exc:  # e.g. TLS files that do not load
        print(f"reconsume namesrv: {exc}", file=sys.stderr)
        return 1


def broker_settings_of(args: argparse.Namespace) -> BrokerSettings:
    """The settings of ``reconsume broker ARGS``: each flag given, else the ``--config``
    file's value, else the default. InvalidArgumentError names a setting refused."""
    from reconsume.broker.config_file import broker_settings, load_config_file
    from reconsume.broker.settings import BrokerSettings

    file_values = load_config_file(args.config) if args.config is not None else {}
    return broker_settings(file_values, given_settings(BrokerSettings, args))


def _broker(args: argparse.Namespace) -> int:
    from reconsume.broker import Broker
    from reconsume.errors import InvalidArgumentError, ReconsumeError
    from reconsume.runtime import run_until_signalled

    try:
        settings = broker_settings_of(args)
    except InvalidArgumentError as exc:
        print(f"reconsume broker: invalid setting: {exc}", file=sys.stderr)
        return 2

    def http_listening(address: str) -> None:
        print(f"reconsume broker serving HTTP on {address}", flush=True)

    broker = Broker(settings, on_http_listening=http_listening)

    async def start() -> str:
        address = await broker.start()
        if broker.grpc_address:
            print(f"reconsume broker serving gRPC on {broker.grpc_address}", flush=True)
        return address

    try:
        return run_until_signalled(start, broker.stop, "reconsume broker")
    except ReconsumeError as exc:
        print(f"reconsume broker: {exc}", file=sys.stderr)
        return 1


def _operator(args: argparse.Namespace) -> int:
    # Only reconsume_operator may import kopf and kubernetes (.importlinter), so the operator
    # runs as its own program (also installed as `reconsume-operator`) instead of an import.
    argv = [sys.executable, "-m", "reconsume_operator", *args.passed_args]
    os.execv(sys.executable, argv)


def _dlq(args: argparse.Namespace) -> int:
    try:
        from reconsume.spark.jobs.main import main as dlq_main
    except ImportError as exc:
        print(f"reconsume dlq needs the spark extra (pip install 'reconsume[spark]'): {exc}",
              file=sys.stderr)  # fmt: skip
        return 2
    return dlq_main(args.passed_args)


def build_parser() -> argparse.ArgumentParser:
    from reconsume.broker.settings import BrokerSettings
    from reconsume.namesrv.settings import NamesrvSettings

    parser = argparse.ArgumentParser(
        prog="reconsume", description="Retry topology for message-queue consumer groups."
    )
    parser.add_argument("--version", action="version", version=f"reconsume {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at debug level")
    commands = parser.add_subparsers(dest="command", required=True)

    demo = commands.add_parser(
        "demo",
        help="an order consumer whose payment service is down: retries, dead letters, a Drain "
        "and a Reprocess job, on this machine (needs Java for Spark)",
    )
    demo.add_argument(
        "--dir",
        type=Path,
        help="where its data, archive and chart go, emptied first (default: ./reconsume-demo)",
    )
    demo.add_argument("--fast", action="store_true", help="fewer orders, shorter delays (tests)")
    demo.set_defaults(run=_demo)

    up = commands.add_parser(
        "up",
        help="embedded mode: run the clusters, topics, groups and dead-letter jobs of manifests "
        "on this machine, reconciling edits until Ctrl-C",
    )
    up.add_argument(
        "-f", "--filename", type=Path, action="append", required=True,
        help="manifest file or directory (*.yaml, *.yml, *.json); repeatable",
    )  # fmt: skip
    up.add_argument("-R", "--recursive", action="store_true", help="into subdirectories too")
    up.add_argument(
        "--data-dir", type=Path, default=Path(".reconsume"),
        help="stores, logs and state (default ./.reconsume)",
    )  # fmt: skip
    up.add_argument(
        "--port", type=int, default=9876,
        help="the first cluster's name-server port (default 9876; 0: any free one)",
    )  # fmt: skip
    up.add_argument(
        "--interval", type=float, default=2.0, help="seconds between passes (default 2)"
    )
    up.set_defaults(run=_up)

    status = commands.add_parser("status", help="what a running `reconsume up` has")
    status.add_argument("--data-dir", type=Path, default=Path(".reconsume"),
                        help="its data directory (default ./.reconsume)")  # fmt: skip
    status.add_argument("--json", action="store_true", help="print the state as JSON")
    status.set_defaults(run=_status)

    # The server flags come from the settings' fields (reconsume.flags), defaults included.
    namesrv = commands.add_parser("namesrv", help="run a name server (broker registry, routes)")
    add_flags(namesrv, NamesrvSettings)
    namesrv.set_defaults(run=_namesrv)

    broker = commands.add_parser("broker", help="run a broker (store, send, pull, admin)")
    broker.add_argument(
        "--config", help="TOML file of settings (keys: setting names); flags override it"
    )
    add_flags(broker, BrokerSettings)
    broker.set_defaults(run=_broker)

    operator = commands.add_parser(
        "operator",
        help="run the Kubernetes operator (needs the operator extra: kopf, kubernetes)",
        add_help=False,
    )
    # Its arguments (-n NS ... | -A, --metrics-port N, --standalone ...) are the operator's own:
    # `reconsume operator --help` lists them.
    operator.set_defaults(run=_operator)

    dlq = commands.add_parser(
        "dlq",
        help="run a dead-letter job on Spark: drain, reprocess or purge (needs the spark extra)",
        add_help=False,
    )
    # Its arguments (drain|reprocess|purge --name-server ... --group ...) are the job's own:
    # `reconsume dlq --help` lists them.
    dlq.set_defaults(run=_dlq)

    store = commands.add_parser("store", help="inspect a broker's message store")
    store_commands = store.add_subparsers(dest="store_command", required=True)
    inspect = store_commands.add_parser(
        "inspect", help="open a store (running recovery) and show its extent and queues"
    )
    inspect.add_argument("dir", type=Path)
    inspect.add_argument("--json", action="store_true", help="print JSON")
    inspect.set_defaults(run=_store_inspect)
    crash = store_commands.add_parser(
        "crash-demo",
        help="write with Sync flush, SIGKILL the writer mid-stream, recover, check nothing "
        "acknowledged is lost",
    )
    crash.add_argument("--rounds", type=int, default=3, help="kill-and-recover rounds")
    crash.add_argument("--dir", type=Path, help="store directory (default: a temporary one)")
    crash.set_defaults(run=_crash_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if args.command in ("operator", "dlq"):
        args.passed_args = rest
    elif rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    code: int = args.run(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
