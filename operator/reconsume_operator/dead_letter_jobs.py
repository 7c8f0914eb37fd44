"""The Kubernetes objects a DeadLetterJob runs, built as pure functions of its resource.

One run is ``reconsume dlq <action> ...`` (see docs/dead-letter-jobs.md) in the dlq-jobs image:
a ``batch/v1`` Job per run (named ``<name>-<generation>``: a changed spec is a new run), or
with ``spec.schedule`` a CronJob whose Jobs have the same pod template, or, when the kubeflow
spark-operator is installed and the master is ``k8s://...``, a SparkApplication. With a
``k8s://`` master the driver creates executor pods, so the run gets a ServiceAccount, a Role
and a RoleBinding of its own. Every object carries an owner reference to the DeadLetterJob.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from reconsume.topology.jobs import DeadLetterJobSpec, Source, job_arguments, resource_conf
from reconsume_operator.job_access import access_of, credentials_conf
from reconsume_operator.naming import labels as base_labels

API_VERSION = "reconsume.io/v1alpha1"
KIND = "DeadLetterJob"
JOB_LABEL = "reconsume.io/dead-letter-job"
GROUP_LABEL = "reconsume.io/consumer-group"
"""Labels of every object of a run (values shortened to 63 characters); the annotations of
the same names hold the full names."""
CONTAINER = "dlq"
TERMINATION_LOG = "/dev/termination-log"
SPARK_CRD = "sparkapplications.sparkoperator.k8s.io"
SPARK_API_VERSION = "sparkoperator.k8s.io/v1beta2"
SPARK_VERSION = "4.0.0"
"""``spec.sparkVersion`` of a SparkApplication (required by spark-operator; informative)."""
JOB_NAME_MAX = 63
"""A Job's name is also a label value of its pods."""
CRON_JOB_NAME_MAX = 52
"""The CronJob controller appends 11 characters to name its Jobs."""
MEMORY_OVERHEAD_FACTOR = 0.4
MEMORY_OVERHEAD_MIN_MIB = 384
"""The driver pod's memory: ``spark.driver.memory`` plus Spark's overhead for a Python
driver (40 %, at least 384 MiB), as Spark sizes a driver pod it creates itself."""
PYTHON_WORKER_MIB = 256
"""With a local master the tasks run in the driver's pod, each in a Python worker process of
its own (the data source and the job's functions are Python): this much more memory per task
slot. Measured on the node tier: a 512m driver with two slots peaked at 809 MiB, which the
384 MiB of Spark's overhead alone left no room for (a real run was OOM-killed)."""
_LOCAL_MASTER = re.compile(r"^local(?:\[(\*|[1-9][0-9]*)(?:,[0-9]+)?\])?$")
RBAC_RESOURCES = ("pods", "services", "configmaps", "persistentvolumeclaims")
RBAC_VERBS = ("create", "get", "list", "watch", "delete", "deletecollection", "patch")
RESTRICTED_CONTAINER: dict[str, Any] = {
    "runAsNonRoot": True,
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}
RESTRICTED_POD: dict[str, Any] = {
    "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
}


# ------------------------------------------------------------------ names and labels
def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def bounded_name(base: str, suffix: str, limit: int) -> str:
    """``base + suffix``, or when longer than ``limit`` a shortened ``base`` with a hash of
    the whole, so that different long names stay different."""
    if len(base) + len(suffix) <= limit:
        return base + suffix
    head = base[: limit - len(suffix) - 9].rstrip("-.")
    return f"{head}-{_digest(base + suffix)}{suffix}"


def label_value(text: str) -> str:
    """``text`` as a label value (at most 63 characters)."""
    return bounded_name(text, "", 63)


def run_name(spec: DeadLetterJobSpec) -> str:
    """The Job (or SparkApplication) of the run of the current spec."""
    return bounded_name(spec.name, f"-{spec.generation}", JOB_NAME_MAX)


def cron_job_name(spec: DeadLetterJobSpec) -> str:
    return bounded_name(spec.name, "", CRON_JOB_NAME_MAX)


def spark_account_name(spec: DeadLetterJobSpec) -> str:
    """The ServiceAccount, Role and RoleBinding of a ``k8s://`` run."""
    return bounded_name(spec.name, "-spark", 253)


def labels(spec: DeadLetterJobSpec) -> dict[str, str]:
    return {
        **base_labels(label_value(spec.name), "dead-letter-job"),
        JOB_LABEL: label_value(spec.name),
        GROUP_LABEL: label_value(spec.consumer_group),
    }


def run_annotations(spec: DeadLetterJobSpec) -> dict[str, str]:
    return {JOB_LABEL: spec.name, GROUP_LABEL: spec.consumer_group}


def owner_reference(spec: DeadLetterJobSpec) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "name": spec.name,
        "uid": spec.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _meta(spec: DeadLetterJobSpec, name: str) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": spec.namespace,
        "labels": labels(spec),
        "annotations": run_annotations(spec),
        "ownerReferences": [owner_reference(spec)],
    }


# ------------------------------------------------------------------ the command
def spark_conf(spec: DeadLetterJobSpec, image: str, *, in_job_pod: bool = True) -> dict[str, str]:
    """Spark properties: the driver's (and, unless the master is local, the executors')
    resources, then ``spec.spark.conf`` (which may override them), then, with a ``k8s://``
    master, what the driver in the Job's pod needs to create executor pods and the label of
    the run on them (not overridable).
    ``$(POD_IP)`` and ``$(POD_NAME)`` are the pod's environment variables, which Kubernetes
    substitutes in the command."""
    conf = resource_conf(spec)
    if spec.kubernetes_master:
        conf["spark.kubernetes.container.image"] = image
    conf.update(spec.conf)
    if spec.kubernetes_master:
        conf["spark.kubernetes.namespace"] = spec.namespace
        # The executors the driver creates carry the label a BrokerCluster's NetworkPolicy
        # admits DeadLetterJob runs by (the Job's own pod has every label of the run).
        conf[f"spark.kubernetes.executor.label.{JOB_LABEL}"] = label_value(spec.name)
        conf["spark.kubernetes.authenticate.driver.serviceAccountName"] = spark_account_name(spec)
        if in_job_pod:
            conf["spark.driver.host"] = "$(POD_IP)"
            conf["spark.kubernetes.driver.pod.name"] = "$(POD_NAME)"
    return conf


def local_slots(spec: DeadLetterJobSpec) -> int | None:
    """Task slots of a local master in the Job's pod (None: not a local master). ``local[*]``
    means the pod's ``spark.driver.cores``, not every core of the node the pod lands on: a
    container sees the node's CPUs, and each slot is a Python worker process."""
    match = _LOCAL_MASTER.match(spec.master.strip())
    if match is None:
        return None
    slots = match.group(1)
    if slots is None:
        return 1
    return spec.driver_cores if slots == "*" else int(slots)


def pod_master(spec: DeadLetterJobSpec) -> str:
    """The master the Job's pod runs: ``local[*]`` as ``local[<driver cores>]``."""
    if spec.master.strip().startswith("local[*"):
        return spec.master.strip().replace("local[*", f"local[{spec.driver_cores}", 1)
    return spec.master


def command(spec: DeadLetterJobSpec, source: Source, image: str) -> list[str]:
    """The container command of a run in a Job's pod (the driver runs in the pod)."""
    conf_flags: list[str] = []
    conf = spark_conf(spec, image)
    if spec.kubernetes_master:
        conf.update(credentials_conf(source))
    for key, value in conf.items():
        conf_flags += ["--conf", f"{key}={value}"]
    return [
        "reconsume", "dlq", *job_arguments(spec, source),
        "--master", pod_master(spec), *conf_flags,
        "--termination-log", TERMINATION_LOG,
    ]  # fmt: skip


def memory_mib(spark_memory: str) -> int:
    """A Spark memory string (``512m``, ``2g``; MiB without a unit) in MiB, rounded up."""
    text = spark_memory.strip().lower()
    unit = text[-1] if text[-1] in "kmgt" else "m"
    number = int(text.rstrip("kmgt"))
    if unit == "k":
        return max(1, -(-number // 1024))
    return number * {"m": 1, "g": 1024, "t": 1024 * 1024}[unit]


def driver_resources(spec: DeadLetterJobSpec) -> dict[str, Any]:
    """The driver's cores, and its memory with Spark's overhead and, with a local master, the
    Python workers of its task slots (:data:`PYTHON_WORKER_MIB`)."""
    mib = memory_mib(spec.driver_memory)
    total = mib + max(MEMORY_OVERHEAD_MIN_MIB, int(mib * MEMORY_OVERHEAD_FACTOR))
    total += (local_slots(spec) or 0) * PYTHON_WORKER_MIB
    return {
        "requests": {"cpu": str(spec.driver_cores), "memory": f"{total}Mi"},
        "limits": {"memory": f"{total}Mi"},
    }


def pod_template(spec: DeadLetterJobSpec, source: Source, image: str) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": image,
        "command": command(spec, source, image),
        "resources": driver_resources(spec),
        "terminationMessagePath": TERMINATION_LOG,
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "securityContext": dict(RESTRICTED_CONTAINER),
    }
    pod: dict[str, Any] = {"restartPolicy": "Never", "securityContext": dict(RESTRICTED_POD)}
    if spec.kubernetes_master:
        container["env"] = [
            {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        ]
        pod["serviceAccountName"] = spark_account_name(spec)
    else:
        pod["automountServiceAccountToken"] = False
    env, mounts, volumes = access_of(source)
    if env:
        container["env"] = [*container.get("env", []), *env]
        container["volumeMounts"] = mounts
        pod["volumes"] = volumes
    pod["containers"] = [container]
    return {"metadata": {"labels": labels(spec), "annotations": run_annotations(spec)}, "spec": pod}


def _job_spec(spec: DeadLetterJobSpec, source: Source, image: str) -> dict[str, Any]:
    # A failed run is not retried in place: a re-run is a new Job (the command is safe to run
    # again; what an earlier attempt handled is skipped).
    return {"backoffLimit": 0, "template": pod_template(spec, source, image)}


def job(spec: DeadLetterJobSpec, source: Source, image: str) -> dict[str, Any]:
    """The Job of the run of the current spec."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": _meta(spec, run_name(spec)),
        "spec": _job_spec(spec, source, image),
    }


def cron_job(
    spec: DeadLetterJobSpec, source: Source, image: str, *, suspend: bool = False
) -> dict[str, Any]:
    """The CronJob of a scheduled DeadLetterJob; ``suspend`` while another job of the same
    consumer group runs."""
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": _meta(spec, cron_job_name(spec)),
        "spec": {
            "schedule": spec.schedule,
            "concurrencyPolicy": "Forbid",
            "suspend": suspend,
            "jobTemplate": {
                "metadata": {"labels": labels(spec), "annotations": run_annotations(spec)},
                "spec": _job_spec(spec, source, image),
            },
        },
    }


def _spark_submit_flags(spec: DeadLetterJobSpec) -> list[str]:
    return ["--master", spec.master, "--termination-log", TERMINATION_LOG]


def spark_application(
    spec: DeadLetterJobSpec, source: Source, image: str, main_file: str
) -> dict[str, Any]:
    """The run as a spark-operator SparkApplication (cluster mode: spark-operator submits it,
    the driver is a pod of its own). ``arguments`` are the job's flags after ``reconsume
    dlq`` (``reconsume/spark/jobs/main.py`` takes the same ones), the Spark properties in
    ``sparkConf`` (spark-operator passes them to spark-submit) instead of ``--conf``."""
    pod_labels = labels(spec)
    return {
        "apiVersion": SPARK_API_VERSION,
        "kind": "SparkApplication",
        "metadata": _meta(spec, run_name(spec)),
        "spec": {
            "type": "Python",
            "pythonVersion": "3",
            "mode": "cluster",
            "image": image,
            "mainApplicationFile": main_file,
            "arguments": [*job_arguments(spec, source), *_spark_submit_flags(spec)],
            "sparkVersion": SPARK_VERSION,
            "restartPolicy": {"type": "Never"},
            "sparkConf": {**spark_conf(spec, image, in_job_pod=False), **credentials_conf(source)},
            "driver": {
                "cores": spec.driver_cores,
                "memory": spec.driver_memory,
                "serviceAccount": spark_account_name(spec),
                "labels": pod_labels,
                "podSecurityContext": dict(RESTRICTED_POD),
                "securityContext": dict(RESTRICTED_CONTAINER),
            },
            "executor": {
                "instances": spec.executor_instances,
                "cores": spec.executor_cores,
                "memory": spec.executor_memory,
                "labels": pod_labels,
                "podSecurityContext": dict(RESTRICTED_POD),
                "securityContext": dict(RESTRICTED_CONTAINER),
            },
        },
    }


def rbac(spec: DeadLetterJobSpec) -> list[dict[str, Any]]:
    """ServiceAccount, Role and RoleBinding of a ``k8s://`` run (the driver manages executor
    pods and their services, config maps and volume claims); none for other masters."""
    if not spec.kubernetes_master:
        return []
    name = spark_account_name(spec)
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(spec, name)},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": _meta(spec, name),
            "rules": [
                {"apiGroups": [""], "resources": list(RBAC_RESOURCES), "verbs": list(RBAC_VERBS)}
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": _meta(spec, name),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": spec.namespace}],
        },
    ]
