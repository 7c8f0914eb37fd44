"""A DeadLetterJob's own account on a cluster with access control: what it may touch, its
keys, and readiness before a run starts.

A run reads and commits the dead letters of one consumer group, keeps a ledger, and sends
messages on: its account holds SUB on the group (which covers ``%RETRY%<g>``, ``%DLQ%<g>`` and
the dead-letter job group ``%DLQ%<g>``), PUB and SUB on the ledger topic, and PUB and SUB on where a
Reprocess sends (``spec.target.topic``, else the group's subscribed topics, the origin topics
of its dead letters). No admin: the operator creates the ledger topic on the brokers before
the first run. The keys are generated into the Secret ``<job>-credentials``, owned by the
DeadLetterJob (so they go with it, and the next rendering of the ACL drops the account), and
mounted into the run's pods (``RECONSUME_CREDENTIALS_DIR``), with the cluster's CA where it
serves TLS.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from reconsume.access.perms import Perm
from reconsume.message.configs import PERM_READ_WRITE, TopicConfig
from reconsume.topology.clusters import ClusterSpec
from reconsume.topology.jobs import DeadLetterJobSpec, Source, job_spec
from reconsume.wire.credential_files import CREDENTIALS_DIR_ENV
from reconsume.wire.tls import TLS_CA_FILE_ENV, TLS_CERT_FILE_ENV, TLS_ENV, TLS_KEY_FILE_ENV
from reconsume_operator.acl_render import AccountEntry
from reconsume_operator.context import OperatorContext
from reconsume_operator.credentials import credentials_secret, new_key_pair, stored_keys
from reconsume_operator.naming import CREDENTIALS_DIR, TLS_DIR, labels

LEDGER_TOPIC = "RECONSUME_DLQ_LEDGER"
"""The dead-letter jobs' ledger, ``reconsume.spark.ledger.LEDGER_TOPIC`` (the operator does not
import the Spark package: .importlinter; a unit test holds the two equal)."""
SECRET_SUFFIX = "-credentials"


def job_secret_name(job: str) -> str:
    return f"{job}{SECRET_SUFFIX}"


def job_entry(
    job: Mapping[str, Any], group: Mapping[str, Any], pairs: list[tuple[str, str]]
) -> list[AccountEntry]:
    """The account(s) of a DeadLetterJob object whose ConsumerGroup object is ``group``."""
    spec = job_spec(job)
    group_spec = group.get("spec") or {}
    group_name = str(group_spec.get("groupName") or group["metadata"]["name"])
    topics: dict[str, Perm] = {LEDGER_TOPIC: Perm.PUB | Perm.SUB}
    if spec.action == "Reprocess":
        # SUB too: a run resuming after a crash reads the target queues' offsets to find what
        # an earlier attempt already re-sent.
        if spec.target_topic is not None:
            topics[spec.target_topic] = Perm.PUB | Perm.SUB
        else:
            for subscription in group_spec.get("subscriptions") or ():
                topics[str(subscription["topic"])] = Perm.PUB | Perm.SUB
    return [
        AccountEntry(
            access_key=access_key,
            secret_key=secret_key,
            owner=f"DeadLetterJob {spec.name}",
            topic_perms=topics,
            group_perms={group_name: Perm.SUB},
        )
        for access_key, secret_key in pairs
    ]


async def ensure_job_secret(
    ctx: OperatorContext, job: DeadLetterJobSpec, cluster: str, owner: Mapping[str, Any]
) -> str:
    """The name of the run's credentials Secret, generated (owned by ``owner``, the job's
    owner reference) when missing."""
    secret_name = job_secret_name(job.name)
    found = await asyncio.to_thread(ctx.writer.get, "v1", "Secret", job.namespace, secret_name)
    if found is not None:
        stored_keys(found)  # raises CredentialsProblem naming what it lacks
        return secret_name
    created = credentials_secret(
        secret_name,
        job.namespace,
        labels(cluster, "dead-letter-job"),
        new_key_pair(f"dlj-{job.name}"),
    )
    created["metadata"]["ownerReferences"] = [dict(owner)]
    await asyncio.to_thread(ctx.writer.create_missing, created)
    return secret_name


async def ensure_ledger(ctx: OperatorContext, spec: ClusterSpec, address: str) -> None:
    """Create the ledger topic on every master of the cluster that lacks it (a run's account
    may not)."""
    async with ctx.admin(address) as admin:
        for broker in await admin.brokers(spec.rocketmq_cluster):
            if broker.master is None:
                continue
            if LEDGER_TOPIC in await admin.topic_configs(broker.master):
                continue
            config = TopicConfig(LEDGER_TOPIC, 1, 1, PERM_READ_WRITE)
            await admin.update_topic(config, brokers=[broker.master])


def access_of(
    source: Source,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """The environment, mounts and volumes of a run's account (``RECONSUME_CREDENTIALS_DIR``)
    and of the cluster's TLS: its CA, and its certificate where the servers ask for one, never
    the rest of the Secret."""
    env: list[dict[str, Any]] = []
    mounts: list[dict[str, Any]] = []
    volumes: list[dict[str, Any]] = []
    if source.credentials_secret is not None:
        env.append({"name": CREDENTIALS_DIR_ENV, "value": CREDENTIALS_DIR})
        mounts.append({"name": "credentials", "mountPath": CREDENTIALS_DIR, "readOnly": True})
        volumes.append({"name": "credentials", "secret": {"secretName": source.credentials_secret}})
    if source.tls_secret is not None:
        keys = ["ca.crt", *(["tls.crt", "tls.key"] if source.tls_certificate else [])]
        env += [
            {"name": TLS_ENV, "value": "true"},
            {"name": TLS_CA_FILE_ENV, "value": f"{TLS_DIR}/ca.crt"},
        ]
        if source.tls_certificate:
            env += [
                {"name": TLS_CERT_FILE_ENV, "value": f"{TLS_DIR}/tls.crt"},
                {"name": TLS_KEY_FILE_ENV, "value": f"{TLS_DIR}/tls.key"},
            ]
        mounts.append({"name": "tls", "mountPath": TLS_DIR, "readOnly": True})
        items = [{"key": key, "path": key} for key in keys]
        volumes.append({"name": "tls", "secret": {"secretName": source.tls_secret, "items": items}})
    return env, mounts, volumes


def credentials_conf(source: Source) -> dict[str, str]:
    """With a ``k8s://`` master, the run's account (and the cluster's TLS settings) in the pods
    Spark creates (the executors', and a SparkApplication's driver), as in the Job's pod.
    Spark mounts a whole Secret there: with TLS, the cluster's key as well."""
    conf: dict[str, str] = {}
    env, mounts, volumes = access_of(source)
    for volume, mount in zip(volumes, mounts, strict=True):
        secret = volume["secret"]["secretName"]
        conf[f"spark.kubernetes.driver.secrets.{secret}"] = mount["mountPath"]
        conf[f"spark.kubernetes.executor.secrets.{secret}"] = mount["mountPath"]
    for variable in env:
        conf[f"spark.kubernetes.driverEnv.{variable['name']}"] = variable["value"]
        conf[f"spark.executorEnv.{variable['name']}"] = variable["value"]
    return conf
