"""DeadLetterJobs on a real API server: the Job (or CronJob, or SparkApplication) a
DeadLetterJob runs, its RBAC in Spark-on-Kubernetes mode, a second job of the same group
waiting for the first, and the status of a run. Nothing runs pods here: the end-to-end tests
run the Job's container command themselves (``reconsume dlq`` against local brokers), then
write the pod and the Job status a kubelet and the Job controller would write."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest
from kopf.testing import KopfRunner
from kubernetes.client.exceptions import ApiException
from prometheus_client import REGISTRY

from reconsume.message.model import Message
from reconsume_operator.config import DEFAULT_DLQ_JOBS_IMAGE
from reconsume_operator.metrics import DEAD_LETTER_JOB_RUNS

from ..integration.cluster import Cluster
from ..spark.dead_letters import fail_into_the_dlq
from .conftest import missing
from .operator_support import (
    GROUP,
    VERSION,
    Resources,
    brokers,
    crds,
    eventually,
    namespace,
    operator,
    resources,
)

__all__ = ["brokers", "crds", "namespace", "operator", "resources"]

DLJ = "deadletterjobs"
CG = "consumergroups"
GROUP_NAME = "GID_orders"
K8S = "k8s://https://kubernetes.default.svc"
NOW = "2026-11-21T10:00:00Z"
UNREACHABLE = "127.0.0.1:1;127.0.0.1:2"
"""An external cluster's name servers that never answer: its groups are never Ready."""
SPARK_CRD = "sparkapplications.sparkoperator.k8s.io"
RECONSUME = shutil.which("reconsume") or str(Path(sys.executable).with_name("reconsume"))
LOCAL_SPARK = {
    "master": "local[2]",
    "driver": {"memory": "512m"},
    "conf": {
        "spark.ui.enabled": "false",
        "spark.driver.host": "127.0.0.1",
        "spark.sql.shuffle.partitions": "2",
    },
}


# ------------------------------------------------------------------ helpers
def create_job(resources: Resources, name: str, **spec: Any) -> None:
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "DeadLetterJob",
        "metadata": {"name": name},
        "spec": {"consumerGroup": "orders-consumer", "action": "Reprocess", **spec},
    }
    resources.custom.create_namespaced_custom_object(GROUP, VERSION, resources.namespace, DLJ, body)


def create_group(resources: Resources, name_server: str) -> None:
    resources.create("brokerclusters", "orders", {"external": {"nameServer": name_server}})
    resources.create(CG, "orders-consumer", {"cluster": "orders", "groupName": GROUP_NAME})


def status(resources: Resources, name: str) -> dict[str, Any]:
    found: dict[str, Any] = (resources.get(DLJ, name) or {}).get("status") or {}
    return found


def wait_phase(resources: Resources, name: str, phase: str, timeout_s: float = 30) -> dict:
    def reached() -> dict[str, Any] | None:
        found = status(resources, name)
        return found if found.get("phase") == phase else None

    def last_status() -> str:
        return f"status: {status(resources, name)}"

    return eventually(reached, timeout_s, f"{name} {phase}", detail=last_status)


def read(call: Any, *args: Any) -> Any:
    """``call(*args)``, or None on 404."""
    try:
        return call(*args)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def owner_of(obj: Any) -> tuple[str, str, bool]:
    (ref,) = obj.metadata.owner_references
    return ref.kind, ref.name, ref.controller


def set_job_status(batch: kubernetes.client.BatchV1Api, ns: str, name: str, state: str) -> None:
    """What the Job controller writes: Running, Succeeded or Failed."""
    body: dict[str, Any] = {"startTime": NOW, "active": 1}
    if state == "Succeeded":
        conditions = [("SuccessCriteriaMet", "CompletionsReached"), ("Complete", "")]
        body = {"startTime": NOW, "active": 0, "succeeded": 1, "completionTime": NOW}
    elif state == "Failed":
        conditions = [("FailureTarget", "BackoffLimitExceeded"), ("Failed", "BackoffLimitExceeded")]
        body = {"startTime": NOW, "active": 0, "failed": 1}
    else:
        conditions = []
    body["conditions"] = [
        {"type": kind, "status": "True", "lastTransitionTime": NOW, **({"reason": r} if r else {})}
        for kind, r in conditions
    ]
    batch.patch_namespaced_job_status(name, ns, {"status": body})


def terminated_pod(
    core: kubernetes.client.CoreV1Api, job: Any, message: str, exit_code: int, container: str
) -> None:
    """The pod of ``job`` as the kubelet leaves it: its container terminated with the message
    of its termination log."""
    ns, name = job.metadata.namespace, job.metadata.name
    template = job.spec.template.spec.containers[0]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{name}-x7k2p",
            "labels": {"batch.kubernetes.io/job-name": name, "job-name": name},
        },
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": container, "image": template.image, "command": ["x"]}],
        },
    }
    core.create_namespaced_pod(ns, pod)
    terminated = {
        "exitCode": exit_code,
        "reason": "Completed" if exit_code == 0 else "Error",
        "message": message,
    }
    container_status = {
        "name": container,
        "image": template.image,
        "imageID": "",
        "ready": False,
        "restartCount": 0,
        "state": {"terminated": terminated},
    }
    phase = "Succeeded" if exit_code == 0 else "Failed"
    core.patch_namespaced_pod_status(
        pod["metadata"]["name"],
        ns,
        {"status": {"phase": phase, "containerStatuses": [container_status]}},
    )


def runs(phase: str) -> float:
    """``reconsume_operator_dead_letter_job_runs_total{phase}`` of this process."""
    DEAD_LETTER_JOB_RUNS.labels(phase)  # the sample exists from now on
    value = REGISTRY.get_sample_value(
        "reconsume_operator_dead_letter_job_runs_total", {"phase": phase}
    )
    assert value is not None
    return value


def reconciles() -> float:
    """Syncs of DeadLetterJobs finished in this process."""
    return sum(
        REGISTRY.get_sample_value(
            "reconsume_operator_reconcile_total", {"kind": "DeadLetterJob", "result": result}
        )
        or 0.0
        for result in ("ok", "pending", "error")
    )


# ------------------------------------------------------------------ Jobs and their specs
def test_a_dead_letter_job_waits_for_its_group_then_runs_as_a_job_it_owns(
    resources: Resources, api: kubernetes.client.ApiClient, brokers: Cluster, operator: KopfRunner
) -> None:
    ns = resources.namespace
    batch = kubernetes.client.BatchV1Api(api)
    create_job(
        resources,
        "orders-dlq",
        action="Drain",
        filter="reconsumeTimes >= 5",
        sink={"format": "json", "path": "s3a://archive/dlq/"},
        maxMessages=1000,
        dryRun=True,
        spark={"driver": {"cores": 2, "memory": "2g"}, "conf": {"spark.a": "b"}},
    )
    condition = resources.wait_condition(DLJ, "orders-dlq", "False", "ConsumerGroupNotFound")
    assert "orders-consumer" in condition["message"]
    assert status(resources, "orders-dlq")["phase"] == "Pending"

    create_group(resources, UNREACHABLE)  # the run is started again (backoff), finds it ...
    condition = resources.wait_condition(DLJ, "orders-dlq", "False", "WaitingForConsumerGroup")
    assert "ConsumerGroup orders-consumer is not Ready" in condition["message"]
    assert "NameServerUnreachable" in condition["message"]
    assert status(resources, "orders-dlq")["phase"] == "Pending"
    assert read(batch.read_namespaced_job, "orders-dlq-1", ns) is None  # ... not yet Ready
    address = brokers.namesrv.address
    resources.patch("brokerclusters", "orders", {"spec": {"external": {"nameServer": address}}})
    job = eventually(lambda: read(batch.read_namespaced_job, "orders-dlq-1", ns), 30, "Job")
    assert owner_of(job) == ("DeadLetterJob", "orders-dlq", True)
    assert job.metadata.labels["reconsume.io/dead-letter-job"] == "orders-dlq"
    assert job.metadata.labels["app.kubernetes.io/name"] == "reconsume"
    assert job.spec.backoff_limit == 0
    pod = job.spec.template.spec
    assert pod.restart_policy == "Never"
    assert pod.security_context.run_as_non_root is True
    assert pod.security_context.seccomp_profile.type == "RuntimeDefault"
    (main,) = pod.containers
    assert main.image == DEFAULT_DLQ_JOBS_IMAGE
    assert main.command == [
        "reconsume", "dlq", "drain",
        "--name-server", address,
        "--group", GROUP_NAME,
        "--job", f"{ns}/orders-dlq",
        "--filter", "reconsumeTimes >= 5",
        "--format", "json", "--path", "s3a://archive/dlq/",
        "--max-messages", "1000", "--dry-run",
        "--master", "local[2]",
        "--conf", "spark.driver.cores=2", "--conf", "spark.driver.memory=2g",
        "--conf", "spark.a=b",
        "--termination-log", "/dev/termination-log",
    ]  # fmt: skip
    assert main.termination_message_policy == "FallbackToLogsOnError"
    assert main.security_context.allow_privilege_escalation is False
    assert main.security_context.capabilities.drop == ["ALL"]
    # 2g, its overhead (40 %) and two local task slots of 256 MiB
    assert main.resources.requests == {"cpu": "2", "memory": "3379Mi"}

    found = resources.wait_condition(DLJ, "orders-dlq", "True", "JobCreated")
    assert "orders-dlq-1" in found["message"]
    assert status(resources, "orders-dlq")["jobName"] == "orders-dlq-1"
    # local mode: no account of its own
    core = kubernetes.client.CoreV1Api(api)
    assert read(core.read_namespaced_service_account, "orders-dlq-spark", ns) is None


def test_spark_on_kubernetes_gets_the_runs_service_account_role_and_binding(
    resources: Resources, api: kubernetes.client.ApiClient, brokers: Cluster, operator: KopfRunner
) -> None:
    ns = resources.namespace
    create_group(resources, brokers.namesrv.address)
    create_job(resources, "replay", spark={"master": K8S, "image": "my/dlq:2"})
    batch = kubernetes.client.BatchV1Api(api)
    job = eventually(lambda: read(batch.read_namespaced_job, "replay-1", ns), 30, "Job")
    core = kubernetes.client.CoreV1Api(api)
    rbac = kubernetes.client.RbacAuthorizationV1Api(api)
    account = core.read_namespaced_service_account("replay-spark", ns)
    role = rbac.read_namespaced_role("replay-spark", ns)
    binding = rbac.read_namespaced_role_binding("replay-spark", ns)
    for obj in (account, role, binding):
        assert owner_of(obj) == ("DeadLetterJob", "replay", True)
    (rule,) = role.rules
    assert set(rule.resources) == {"pods", "services", "configmaps", "persistentvolumeclaims"}
    assert "deletecollection" in rule.verbs
    assert binding.subjects[0].name == "replay-spark"
    pod = job.spec.template.spec
    assert pod.service_account_name == "replay-spark"
    (main,) = pod.containers
    assert main.image == "my/dlq:2"
    assert {e.name: e.value_from.field_ref.field_path for e in main.env} == {
        "POD_IP": "status.podIP",
        "POD_NAME": "metadata.name",
    }
    conf = [main.command[i + 1] for i, arg in enumerate(main.command) if arg == "--conf"]
    assert f"spark.kubernetes.namespace={ns}" in conf
    assert "spark.kubernetes.authenticate.driver.serviceAccountName=replay-spark" in conf
    assert "spark.driver.host=$(POD_IP)" in conf
    assert "spark.kubernetes.driver.pod.name=$(POD_NAME)" in conf


def test_a_schedule_runs_as_a_cron_job_and_reports_its_last_run(
    resources: Resources, api: kubernetes.client.ApiClient, brokers: Cluster, operator: KopfRunner
) -> None:
    ns = resources.namespace
    create_group(resources, brokers.namesrv.address)
    create_job(resources, "nightly", action="Purge", schedule="0 3 * * *")
    batch = kubernetes.client.BatchV1Api(api)
    cron = eventually(lambda: read(batch.read_namespaced_cron_job, "nightly", ns), 30, "CronJob")
    assert owner_of(cron) == ("DeadLetterJob", "nightly", True)
    assert cron.spec.schedule == "0 3 * * *"
    assert cron.spec.concurrency_policy == "Forbid"
    assert cron.spec.suspend is False
    template = cron.spec.job_template
    assert template.spec.backoff_limit == 0
    (main,) = template.spec.template.spec.containers
    assert main.command[:3] == ["reconsume", "dlq", "purge"]
    resources.wait_condition(DLJ, "nightly", "True", "Scheduled")
    assert read(batch.read_namespaced_job, "nightly-1", ns) is None  # no run of its own

    # What the CronJob controller does at 03:00: a Job from the template, owned by the CronJob.
    run = "nightly-29400000"
    batch.create_namespaced_job(
        ns,
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": run,
                "labels": template.metadata.labels,
                "annotations": template.metadata.annotations,
                "ownerReferences": [
                    {
                        "apiVersion": "batch/v1",
                        "kind": "CronJob",
                        "name": "nightly",
                        "uid": cron.metadata.uid,
                        "controller": True,
                    }
                ],
            },
            "spec": api.sanitize_for_serialization(template.spec),
        },
    )
    batch.patch_namespaced_cron_job_status("nightly", ns, {"status": {"lastScheduleTime": NOW}})
    set_job_status(batch, ns, run, "Running")
    assert wait_phase(resources, "nightly", "Running")["jobName"] == run
    set_job_status(batch, ns, run, "Succeeded")
    found = wait_phase(resources, "nightly", "Succeeded")
    assert found["jobName"] == run
    assert found["lastScheduleTime"] == NOW


def test_a_second_job_of_the_group_waits_until_the_first_has_finished(
    resources: Resources, api: kubernetes.client.ApiClient, brokers: Cluster, operator: KopfRunner
) -> None:
    ns = resources.namespace
    batch = kubernetes.client.BatchV1Api(api)
    create_group(resources, brokers.namesrv.address)
    create_job(resources, "first")
    eventually(lambda: read(batch.read_namespaced_job, "first-1", ns), 30, "first Job")
    create_job(resources, "second", action="Purge")
    condition = resources.wait_condition(DLJ, "second", "False", "WaitingForJob")
    assert "first-1" in condition["message"]
    assert "DeadLetterJob first" in condition["message"]
    assert status(resources, "second")["phase"] == "Pending"
    assert read(batch.read_namespaced_job, "second-1", ns) is None

    set_job_status(batch, ns, "first-1", "Running")
    wait_phase(resources, "first", "Running")
    assert read(batch.read_namespaced_job, "second-1", ns) is None
    set_job_status(batch, ns, "first-1", "Succeeded")
    eventually(lambda: read(batch.read_namespaced_job, "second-1", ns), 30, "second Job")
    resources.wait_condition(DLJ, "second", "True", "JobCreated")
    assert wait_phase(resources, "first", "Succeeded")["jobName"] == "first-1"


# ------------------------------------------------------------------ spark-operator
SPARK_APPLICATIONS_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {
        "name": SPARK_CRD,
        # *.k8s.io groups need it; spark-operator's own CRD carries the same
        "annotations": {
            "api-approved.kubernetes.io": "https://github.com/kubeflow/spark-operator/pull/1298"
        },
    },
    "spec": {
        "group": "sparkoperator.k8s.io",
        "scope": "Namespaced",
        "names": {"kind": "SparkApplication", "plural": "sparkapplications"},
        "versions": [
            {
                "name": "v1beta2",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                    }
                },
            }
        ],
    },
}


def test_with_spark_operator_installed_a_kubernetes_job_is_a_spark_application(
    resources: Resources, api: kubernetes.client.ApiClient, brokers: Cluster, operator: KopfRunner
) -> None:
    ns = resources.namespace
    extensions = kubernetes.client.ApiextensionsV1Api(api)
    extensions.create_custom_resource_definition(SPARK_APPLICATIONS_CRD)
    try:
        eventually(
            lambda: any(
                c.type == "Established" and c.status == "True"
                for c in extensions.read_custom_resource_definition(SPARK_CRD).status.conditions
                or ()
            ),
            30,
            "SparkApplication CRD established",
        )
        custom = kubernetes.client.CustomObjectsApi(api)
        spark = ("sparkoperator.k8s.io", "v1beta2", ns, "sparkapplications")
        create_group(resources, brokers.namesrv.address)
        create_job(
            resources,
            "replay",
            filter="tags = 'a'",
            spark={"master": K8S, "executor": {"instances": 3}},
        )
        app = eventually(lambda: read(custom.get_namespaced_custom_object, *spark, "replay-1"))
        assert app["metadata"]["ownerReferences"][0]["name"] == "replay"
        body = app["spec"]
        assert (body["type"], body["mode"]) == ("Python", "cluster")
        assert body["mainApplicationFile"].startswith("local://")
        assert body["arguments"][:7] == [
            "reprocess", "--name-server", brokers.namesrv.address, "--group", GROUP_NAME,
            "--job", f"{ns}/replay",
        ]  # fmt: skip
        assert body["driver"]["serviceAccount"] == "replay-spark"
        assert body["executor"]["instances"] == 3
        rbac = kubernetes.client.RbacAuthorizationV1Api(api)
        assert rbac.read_namespaced_role("replay-spark", ns).rules
        batch = kubernetes.client.BatchV1Api(api)
        assert read(batch.read_namespaced_job, "replay-1", ns) is None

        def set_state(state: str) -> None:
            custom.patch_namespaced_custom_object_status(
                *spark, "replay-1", {"status": {"applicationState": {"state": state}}}
            )

        set_state("RUNNING")
        wait_phase(resources, "replay", "Running")  # the timer mirrors the state
        set_state("FAILED")
        found = wait_phase(resources, "replay", "Failed")
        assert found["jobName"] == "replay-1"
        condition = resources.condition(DLJ, "replay") or {}
        assert condition["reason"] == "JobFailed"
        assert "FAILED" in condition["message"]
    finally:
        extensions.delete_custom_resource_definition(SPARK_CRD)
        eventually(
            lambda: read(extensions.read_custom_resource_definition, SPARK_CRD) is None,
            60,
            "SparkApplication CRD gone",
        )


# ------------------------------------------------------------------ end to end
def fill_dead_letters(brokers: Cluster, topic: str, count: int) -> None:
    """``count`` messages (tags even, odd ...) consumed by a group that always fails with at
    most 0 reconsume times: every one ends in %DLQ%GID_orders (the group the operator made)."""
    messages = []
    for i in range(count):
        message = Message(topic, f"order-{i}".encode())
        message.tags = "even" if i % 2 == 0 else "odd"
        messages.append(message)
    asyncio.run(fail_into_the_dlq(brokers, topic, GROUP_NAME, messages, create_group=False))


def run_command(command: list[str], tmp_path: Path) -> tuple[int, str]:
    """Run a Job's container command here (the image's ``reconsume`` is this checkout's); the
    exit code and what it wrote to its termination log."""
    if shutil.which("java") is None:
        missing("java is not installed (Debian: apt-get install openjdk-17-jre-headless)")
    log = tmp_path / "termination-log"
    argv = [RECONSUME if arg == "reconsume" and i == 0 else arg for i, arg in enumerate(command)]
    argv = [str(log) if arg == "/dev/termination-log" else arg for arg in argv]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=240, env=env, check=False)
    assert log.exists(), f"no result written; exit {done.returncode}:\n{done.stderr[-3000:]}"
    return done.returncode, log.read_text()


def start_run(resources: Resources, brokers: Cluster, batch: Any, name: str, **spec: Any) -> Any:
    create_group(resources, brokers.namesrv.address)
    resources.wait_condition(CG, "orders-consumer", "True", "Reconciled")
    create_job(resources, name, spark=LOCAL_SPARK, **spec)
    ns = resources.namespace
    job = eventually(lambda: read(batch.read_namespaced_job, f"{name}-1", ns), 30, "Job")
    set_job_status(batch, ns, f"{name}-1", "Running")
    wait_phase(resources, name, "Running")
    return job


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_run_reports_the_counts_of_its_commands_result(
    resources: Resources,
    brokers: Cluster,
    api: kubernetes.client.ApiClient,
    operator: KopfRunner,
    tmp_path: Path,
) -> None:
    batch = kubernetes.client.BatchV1Api(api)
    core = kubernetes.client.CoreV1Api(api)
    job = start_run(resources, brokers, batch, "replay", filter="tags = 'even'")
    fill_dead_letters(brokers, "orders", 12)
    succeeded_before = runs("Succeeded")

    code, message = run_command(job.spec.template.spec.containers[0].command, tmp_path)
    result = json.loads(message)
    assert (code, result["phase"]) == (0, "Succeeded"), result
    terminated_pod(core, job, message, code, "dlq")
    set_job_status(batch, resources.namespace, "replay-1", "Succeeded")

    found = wait_phase(resources, "replay", "Succeeded")
    expected = {"read": 12, "matched": 6, "resent": 6, "archived": 0, "skipped": 0}
    assert {k: result["counts"][k] for k in expected} == expected
    assert {k: v for k, v in found["counts"].items() if k in expected} == expected
    assert found["startTime"] == result["startTime"]
    assert found["completionTime"] == result["completionTime"]
    assert {(o["broker"], o["queueId"]) for o in found["offsets"]} == {
        ("broker-a", 0),
        ("broker-b", 0),
    }
    assert sum(o["end"] - o["start"] for o in found["offsets"]) == 12
    condition = resources.condition(DLJ, "replay") or {}
    assert (condition["status"], condition["reason"]) == ("True", "Succeeded")
    assert "resent 6" in condition["message"]
    # Counted once the status write returns: the status may be read before that.
    eventually(lambda: runs("Succeeded") == succeeded_before + 1, 10, "the run counted")
    started = eventually(lambda: resources.events("Started", "replay"), 10, "Started event")
    assert started == ["Job replay-1 started"]
    finished = eventually(lambda: resources.events("Succeeded", "replay"), 10, "Succeeded event")
    assert finished == [condition["message"]]

    # Another event of the finished Job syncs the DeadLetterJob again: the run is not
    # counted twice.
    synced_before = reconciles()
    batch.patch_namespaced_job(
        "replay-1", resources.namespace, {"metadata": {"labels": {"x": "y"}}}
    )
    eventually(lambda: reconciles() > synced_before, 30, "another sync")
    assert runs("Succeeded") == succeeded_before + 1
    assert wait_phase(resources, "replay", "Succeeded") == found


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_bad_filter_fails_the_run_with_reason_invalid_filter(
    resources: Resources,
    brokers: Cluster,
    api: kubernetes.client.ApiClient,
    operator: KopfRunner,
    tmp_path: Path,
) -> None:
    batch = kubernetes.client.BatchV1Api(api)
    core = kubernetes.client.CoreV1Api(api)
    job = start_run(resources, brokers, batch, "broken", filter="tags = (")
    fill_dead_letters(brokers, "orders", 2)
    failed_before = runs("Failed")

    code, message = run_command(job.spec.template.spec.containers[0].command, tmp_path)
    result = json.loads(message)
    assert (code, result["phase"], result.get("reason")) == (1, "Failed", "InvalidFilter"), result
    terminated_pod(core, job, message, code, "dlq")
    set_job_status(batch, resources.namespace, "broken-1", "Failed")

    wait_phase(resources, "broken", "Failed")
    condition = resources.condition(DLJ, "broken") or {}
    assert (condition["status"], condition["reason"]) == ("False", "InvalidFilter")
    assert condition["message"] == result["message"]
    eventually(lambda: runs("Failed") == failed_before + 1, 10, "the run counted")
