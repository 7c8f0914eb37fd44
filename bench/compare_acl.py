"""Access control off and on, reconsume side by side with Apache RocketMQ 5.3.2 (ACL 1.0).

    python -m bench.compare_rocketmq --acl --out bench/out            # ~10 min
    python -m bench.compare_rocketmq --acl --quick --out /tmp/bench   # seconds, numbers meaningless

The JSON goes to ``OUT/compare_rocketmq_acl.json`` and its section of bench/RESULTS.md to
``compare_rocketmq_acl.md`` beside it (``bench.acl_report``).

For each system, a fresh name server and broker with access control off, then another with it
on, against the same commands of the Java load generator as ``bench.compare_rocketmq`` (Async
flush): setup, an unmeasured warm-up and its draining, produce from 1 and from 8 threads, a fill
and its draining by a push consumer (consume). With access control on, the load generator signs
every request (``--access-key``/``--secret-key``: Apache RocketMQ's ``AclClientRPCHook``), as
``ADMIN`` for setup (creating topics needs an admin on both systems) and as ``CLIENT`` for the
rest, an account with ``PUB|SUB`` on the bench topics and ``SUB`` on the consumer groups only.
Off: unsigned clients, servers without access control. So the cost measured is the whole of it:
the client's signing and the broker's check of every request.

* reconsume: ``reconsume namesrv --acl-file acl.toml`` and ``reconsume broker ... --acl-file
  acl.toml`` with ``RECONSUME_ACCESS_KEY``/``RECONSUME_SECRET_KEY`` of ``ADMIN`` (its own
  registrations are signed, and its name server checks them).
* Apache RocketMQ: the 5.3.2 broker (``bench/java/servers-acl``: 5.3.3 removed ACL 1.0) for
  both runs, ``aclEnable=true`` in broker.conf and ``<rocketmq.home.dir>/conf/plain_acl.yml`` for
  the run with access control. Its name server checks nothing, so the broker's registration
  needs no account; it is 5.3.3's (``bench/java/servers``): Maven Central has no
  rocketmq-namesrv 5.3.0 to 5.3.2, and its sources did not change from 5.3.2 to 5.3.3. ACL 2.0
  (``authenticationEnabled``, ``authorizationEnabled``) stays off.

Cost per message = 1e6 / (msg/s on) - 1e6 / (msg/s off), in microseconds of the command's wall
time per message; the broker's CPU time per message is reported on and off as well.
"""

from __future__ import annotations

import shlex
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.common import data_dir, loadavg, settle_disk
from bench.compare_rocketmq import SYSTEMS, CompareSizes, _brief, _loadgen
from bench.rocketmq_servers import (
    BROKER_JVM,
    BROKER_MAIN,
    DELAY_LEVELS,
    MVN_COMMAND,
    NAMESRV_JVM,
    NAMESRV_MAIN,
    SERVER_ACL_LIB,
    SERVER_LIB,
    STOP_TIMEOUT_S,
    _jar_version,
    broker_conf,
    display,
    ensure_built,
    free_ports,
    loadgen_command,
    start_broker,
    start_namesrv,
    versions,
)
from bench.servers import Running, cpu_seconds, servers
from reconsume.wire.signing import ACCESS_KEY_ENV, SECRET_KEY_ENV

FILE = "compare_rocketmq_acl"
ADMIN = ("bench-admin", "bench-admin-secret-0123456789")
"""(access key, secret key) of the admin account: setup, and reconsume broker's own requests."""
CLIENT = ("bench-client", "bench-client-secret-0123456789")
"""(access key, secret key) of the producers' and consumers' account."""
TOPICS = ("BenchWarmup", "BenchProduce", "BenchConsume")
GROUPS = ("bench-warmup", "bench-consume")
SIZE_FIELDS = ("warmup_seconds", "produce_seconds", "produce_warmup_seconds", "consume_messages")
"""What of ``CompareSizes`` these commands use."""
ACL_LINES = ("aclEnable=true",)
"""broker.conf's lines beside ``broker_conf``'s in Apache RocketMQ's run with access control."""


def plain_acl_yml() -> str:
    """Apache RocketMQ's ``conf/plain_acl.yml``: no whitelisted address (127.0.0.1 would pass
    unsigned), the admin, and the client with what the commands need and nothing else."""
    lines = ["globalWhiteRemoteAddresses: []", "accounts:"]
    lines += [f"  - accessKey: {ADMIN[0]}", f"    secretKey: {ADMIN[1]}", "    admin: true"]
    lines += [f"  - accessKey: {CLIENT[0]}", f"    secretKey: {CLIENT[1]}", "    admin: false"]
    lines += ["    defaultTopicPerm: DENY", "    defaultGroupPerm: DENY", "    topicPerms:"]
    lines += [f"      - {topic}=PUB|SUB" for topic in TOPICS]
    lines += ["    groupPerms:", *(f"      - {group}=SUB" for group in GROUPS), ""]
    return "\n".join(lines)


def acl_toml() -> str:
    """reconsume's ``--acl-file``: the same accounts and permissions as :func:`plain_acl_yml`."""
    topics = ", ".join(f'{topic} = "PUB|SUB"' for topic in TOPICS)
    groups = ", ".join(f'"{group}" = "SUB"' for group in GROUPS)
    return "\n".join(
        [
            "global_white_remote_addresses = []",
            "",
            "[[accounts]]",
            f'access_key = "{ADMIN[0]}"',
            f'secret_key = "{ADMIN[1]}"',
            "admin = true",
            "",
            "[[accounts]]",
            f'access_key = "{CLIENT[0]}"',
            f'secret_key = "{CLIENT[1]}"',
            'default_topic_perm = "DENY"',
            'default_group_perm = "DENY"',
            f"topic_perms = {{ {topics} }}",
            f"group_perms = {{ {groups} }}",
            "",
        ]
    )


def commands(sizes: CompareSizes) -> list[tuple[str, str, list[str]]]:
    """(case, account: "admin" or "client", LoadGen arguments after ``--namesrv``) in the order
    they run; ``WARMUP_SENT`` stands for the number of messages the warm-up sent."""
    produce = ["--topic", "BenchProduce", "--seconds", f"{sizes.produce_seconds:g}"]
    produce += ["--warmup-seconds", f"{sizes.produce_warmup_seconds:g}", "--body", "1024"]
    messages = str(sizes.consume_messages)
    return [
        ("setup", "admin", ["setup", "--topics", ",".join(TOPICS), "--queues", "8"]),
        ("warmup", "client", ["produce", "--topic", "BenchWarmup", "--threads", "8",
                              "--seconds", f"{sizes.warmup_seconds:g}", "--warmup-seconds", "0"]),
        ("warmup-drain", "client", ["consume", "--topic", "BenchWarmup", "--group", GROUPS[0],
                                    "--messages", "WARMUP_SENT"]),
        ("produce-1", "client", ["produce", "--threads", "1", *produce]),
        ("produce-8", "client", ["produce", "--threads", "8", *produce]),
        ("fill", "client", ["fill", "--topic", "BenchConsume", "--messages", messages]),
        ("consume", "client", ["consume", "--topic", "BenchConsume", "--group", GROUPS[1],
                               "--messages", messages]),
    ]  # fmt: skip


def signing_args(account: str) -> list[str]:
    """The load generator's ``--access-key``/``--secret-key`` for ``account``."""
    access_key, secret_key = ADMIN if account == "admin" else CLIENT
    return ["--access-key", access_key, "--secret-key", secret_key]


@contextmanager
def reconsume_acl_servers(data_root: Path, acl: bool) -> Iterator[Running]:
    """reconsume's name server and broker (Async flush), both with ``--acl-file`` and the broker
    signing as ``ADMIN`` when ``acl``, else neither."""
    name = f"vs-rocketmq-acl-{'on' if acl else 'off'}"
    flags = ("--delay-levels", DELAY_LEVELS)
    with ExitStack() as stack:
        if not acl:
            yield stack.enter_context(servers(data_root, "Async", *flags, name=name))
            return
        acl_file = stack.enter_context(data_dir(data_root, "acl-file")) / "acl.toml"
        acl_file.write_text(acl_toml())
        acl_args = ("--acl-file", str(acl_file))
        env = {ACCESS_KEY_ENV: ADMIN[0], SECRET_KEY_ENV: ADMIN[1]}
        yield stack.enter_context(
            servers(
                data_root, "Async", *flags, *acl_args, name=name, namesrv_args=acl_args,
                broker_env=env,
            )
        )  # fmt: skip


@contextmanager
def rocketmq_acl_servers(data_root: Path, acl: bool) -> Iterator[Running]:
    """Apache RocketMQ's 5.3.3 name server and 5.3.2 broker (Async flush) under a fresh
    ``data_root/rocketmq-acl-<on|off>-*``, their rocketmq.home.dir and user.home; with ``acl``,
    ``aclEnable=true`` and ``conf/plain_acl.yml`` there."""
    with ExitStack() as stack:
        name = f"rocketmq-acl-{'on' if acl else 'off'}"
        home = stack.enter_context(data_dir(data_root.resolve(), name))
        namesrv_port, broker_port = free_ports()
        store = home / "store"
        conf = home / "broker.conf"
        extra = ACL_LINES if acl else ()
        conf.write_text(
            broker_conf(namesrv_port, broker_port, str(store), "Async", DELAY_LEVELS, extra=extra)
        )
        if acl:
            (home / "conf").mkdir()
            (home / "conf" / "plain_acl.yml").write_text(plain_acl_yml())
        namesrv = start_namesrv(home, namesrv_port, lib=SERVER_LIB)
        stack.callback(namesrv.stop, STOP_TIMEOUT_S)
        broker = start_broker(home, conf, broker_port, lib=SERVER_ACL_LIB)
        stack.callback(broker.stop, STOP_TIMEOUT_S)
        yield Running(namesrv.address, broker, "Async", store)


def _servers(system: str, data_root: Path, acl: bool) -> AbstractContextManager[Running]:
    if system == "rocketmq":
        return rocketmq_acl_servers(data_root, acl)
    return reconsume_acl_servers(data_root, acl)


def unsigned_send_refused(running: Running, log_root: Path) -> bool:
    """Whether the broker refuses an unsigned send to a bench topic (the load generator's
    ``produce`` exits 1 when its first send fails)."""
    args = ["--topic", TOPICS[1], "--threads", "1", "--seconds", "0", "--warmup-seconds", "0"]
    command = loadgen_command("produce", running.namesrv, *args, log_root=log_root)
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    return done.returncode != 0


def run_system(
    system: str, acl: bool, sizes: CompareSizes, data_root: Path, log: Callable[[str], None]
) -> dict[str, Any]:
    """Sync the disk (:func:`~bench.common.settle_disk`), start ``system``'s servers with
    access control ``acl``, run every command against them (signed when ``acl``), stop
    them."""
    cases: dict[str, Any] = {}
    state = "on" if acl else "off"
    sync_seconds = settle_disk()
    started = time.perf_counter()
    with _servers(system, data_root, acl) as running:
        start_seconds = time.perf_counter() - started
        log_root = running.store.parent / "client-logs"
        warmup_sent = "0"
        for case, account, args in commands(sizes):
            args = [warmup_sent if a == "WARMUP_SENT" else a for a in args]
            load_start, cpu_start = loadavg(), cpu_seconds(running.broker.pid)
            wall_start = time.perf_counter()
            result = _loadgen([*args, *(signing_args(account) if acl else [])], running, log_root)
            result["wall_seconds"] = time.perf_counter() - wall_start
            result["broker_cpu_seconds"] = cpu_seconds(running.broker.pid) - cpu_start
            result["loadavg_start"] = load_start
            result["args"] = args
            result["account"] = account if acl else None
            cases[case] = result
            if case == "warmup":
                warmup_sent = str(result["messages"])
            log(f"  {system} ACL {state} {case}: {_brief(result)}")
        refused = unsigned_send_refused(running, log_root)
        if refused != acl:
            raise RuntimeError(f"{system} with ACL {state}: an unsigned send refused: {refused}")
        stopping = time.perf_counter()
    return {
        "system": system,
        "acl": acl,
        "flush_mode": "Async",
        "unsigned_send_refused": refused,
        "sync_seconds": sync_seconds,
        "start_seconds": start_seconds,
        "stop_seconds": time.perf_counter() - stopping,
        "cases": cases,
    }


def _masked(text: str) -> str:
    return text.replace(ADMIN[1], "ADMIN_SECRET").replace(CLIENT[1], "CLIENT_SECRET")


def settings(sizes: CompareSizes) -> dict[str, Any]:
    """How the servers and the load generator were run (``DIR``: a run's data directory)."""
    home = ("-Drocketmq.home.dir=DIR", "-Duser.home=DIR", "-cp")
    reconsume = (
        "reconsume broker --listen 127.0.0.1:0 --namesrv NAMESRV --store-dir DIR/store "
        "--broker-name bench-broker --cluster bench --flush Async --config broker.toml "
        f"--delay-levels {shlex.quote(DELAY_LEVELS)}"
    )
    keys = f"{ACCESS_KEY_ENV}={ADMIN[0]} {SECRET_KEY_ENV}=ADMIN_SECRET"
    return {
        "sizes": {key: asdict(sizes)[key] for key in SIZE_FIELDS},
        "accounts": {"admin": ADMIN[0], "client": CLIENT[0]},
        "mvn": display(MVN_COMMAND),
        "namesrv_command": shlex.join(
            [
                "java",
                *NAMESRV_JVM,
                *home,
                f"{display([str(SERVER_LIB)])}/*",
                NAMESRV_MAIN,
                "-c",
                "namesrv.conf",
            ]
        ),
        "broker_command": shlex.join(
            [
                "java",
                *BROKER_JVM,
                *home,
                f"{display([str(SERVER_ACL_LIB)])}/*",
                BROKER_MAIN,
                "-c",
                "broker.conf",
            ]
        ),
        "broker_conf": broker_conf(
            9876, 10911, "DIR/store", "Async", DELAY_LEVELS, extra=ACL_LINES
        ),
        "plain_acl_yml": _masked(plain_acl_yml()),
        "acl_toml": _masked(acl_toml()),
        "reconsume_commands": {
            "off": ["reconsume namesrv --listen 127.0.0.1:0", reconsume],
            "on": [
                "reconsume namesrv --listen 127.0.0.1:0 --acl-file acl.toml",
                f"{keys} {reconsume} --acl-file acl.toml",
            ],
        },
        "loadgen_prefix": display(loadgen_command("-", "-", log_root=Path("DIR"))[:-3]),
        "commands": [
            {
                "case": case,
                "args": shlex.join(args),
                "signing": _masked(shlex.join(signing_args(account))),
            }
            for case, account, args in commands(sizes)
        ],
    }


def run(
    data_root: Path,
    quick: bool = False,
    log: Callable[[str], None] = print,
    systems: Sequence[str] = SYSTEMS,
) -> dict[str, Any]:
    """Each system with access control off, then on."""
    sizes = CompareSizes.quick() if quick else CompareSizes.full()
    document: dict[str, Any] = {"scenario": FILE, "quick": quick, "settings": settings(sizes)}
    reason = ensure_built(log)
    if reason is not None:
        if not quick:
            raise RuntimeError(f"cannot compare with Apache RocketMQ: {reason}")
        log(f"  skipped: {reason}")
        document["skipped"] = reason
        return document
    document["versions"] = {
        **versions(SERVER_ACL_LIB),
        "rocketmq_namesrv": _jar_version(SERVER_LIB, "rocketmq-namesrv"),
    }
    document["runs"] = [
        run_system(system, acl, sizes, data_root, log)
        for system in systems
        for acl in (False, True)
    ]
    return document
