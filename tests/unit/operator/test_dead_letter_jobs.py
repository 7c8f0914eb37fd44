"""The objects a DeadLetterJob runs (Job, CronJob, SparkApplication, RBAC), built from its
resource with the CRD's defaults, and its status from what a run's Job, pod and result
report; the status documents fit the CRD's status schema."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from reconsume import __version__
from reconsume.topology.jobs import Source, job_spec
from reconsume_operator.config import OperatorConfig
from reconsume_operator.dead_letter_jobs import (
    CRON_JOB_NAME_MAX,
    GROUP_LABEL,
    JOB_LABEL,
    JOB_NAME_MAX,
    bounded_name,
    command,
    cron_job,
    cron_job_name,
    driver_resources,
    job,
    label_value,
    memory_mib,
    rbac,
    run_name,
    spark_application,
)
from reconsume_operator.job_status import (
    FAILED,
    PENDING,
    RUNNING,
    SUCCEEDED,
    RunState,
    job_state,
    newly_finished,
    offsets_list,
    parse_result,
    spark_state,
    status_changed,
    status_document,
)

from ..crds.schema import defaulted, load_crds, root_schema, validate

CRDS = load_crds()
SOURCE = Source("ns1:9876;ns2:9876", "GID_orders")
IMAGE = "registry.example/dlq-jobs:1"
NOW = datetime(2026, 11, 21, 10, 0, 0, tzinfo=UTC)
K8S = "k8s://https://kubernetes.default.svc"


def resource(name: str = "orders-dlq", generation: int = 3, **spec: Any) -> dict[str, Any]:
    body = {
        "apiVersion": "reconsume.io/v1alpha1",
        "kind": "DeadLetterJob",
        "metadata": {"name": name, "namespace": "shop", "uid": "u-1", "generation": generation},
        "spec": {"consumerGroup": "orders-consumer", "action": "Reprocess", **spec},
    }
    document: dict[str, Any] = defaulted(root_schema(CRDS["DeadLetterJob"]), body)
    return document


def spec_of(**spec: Any) -> Any:
    return job_spec(resource(**spec))


def conf_flags(argv: list[str]) -> dict[str, str]:
    return dict(argv[i + 1].split("=", 1) for i, arg in enumerate(argv) if arg == "--conf")


def container(obj: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = obj["spec"]["template"]["spec"]["containers"][0]
    return found


# ------------------------------------------------------------------ the command
def test_a_drain_runs_reconsume_dlq_with_every_flag_of_its_spec() -> None:
    spec = spec_of(
        action="Drain",
        filter="reconsumeTimes >= 5",
        sink={"format": "json", "path": "s3a://archive/dlq/"},
        maxMessages=1000,
        dryRun=True,
    )
    argv = command(spec, SOURCE, IMAGE)
    assert argv[:10] == [
        "reconsume", "dlq", "drain",
        "--name-server", "ns1:9876;ns2:9876",
        "--group", "GID_orders",
        "--job", "shop/orders-dlq",
        "--filter",
    ]  # fmt: skip
    assert argv[10:18] == [
        "reconsumeTimes >= 5",
        "--format", "json", "--path", "s3a://archive/dlq/",
        "--max-messages", "1000", "--dry-run",
    ]  # fmt: skip
    # local[*]: as many task slots as the pod's cores, not the node's
    assert argv[argv.index("--master") + 1] == "local[1]"
    assert argv[-2:] == ["--termination-log", "/dev/termination-log"]
    # a local master: the driver's resources only (executors do not exist)
    assert conf_flags(argv) == {"spark.driver.cores": "1", "spark.driver.memory": "1g"}


def test_reprocess_and_purge_pass_only_their_own_flags() -> None:
    reprocess = command(spec_of(target={"topic": "orders"}, ratePerSecond=50), SOURCE, IMAGE)
    assert reprocess[2] == "reprocess"
    assert reprocess[reprocess.index("--target-topic") + 1] == "orders"
    assert reprocess[reprocess.index("--rate-per-second") + 1] == "50"
    for absent in ("--filter", "--format", "--path", "--dry-run", "--max-messages"):
        assert absent not in reprocess
    purge = command(spec_of(action="Purge"), SOURCE, IMAGE)
    assert purge[2] == "purge"
    assert "--target-topic" not in purge
    assert "--format" not in purge


def test_spark_settings_become_conf_flags_and_spec_conf_overrides_the_resources() -> None:
    spec = spec_of(
        spark={
            "master": "spark://spark-master:7077",
            "driver": {"cores": 2, "memory": "2g"},
            "executor": {"instances": 4, "cores": 3, "memory": "6g"},
            "conf": {"spark.sql.shuffle.partitions": "8", "spark.executor.memory": "5g"},
        }
    )
    argv = command(spec, SOURCE, IMAGE)
    assert argv[argv.index("--master") + 1] == "spark://spark-master:7077"
    assert conf_flags(argv) == {
        "spark.driver.cores": "2",
        "spark.driver.memory": "2g",
        "spark.executor.instances": "4",
        "spark.executor.cores": "3",
        "spark.executor.memory": "5g",
        "spark.cores.max": "12",  # a standalone master would give it every free core
        "spark.sql.shuffle.partitions": "8",
    }
    assert argv.count("--conf") == 7


# ------------------------------------------------------------------ the Job
def test_the_job_runs_once_restricted_with_the_drivers_resources_and_an_owner() -> None:
    obj = job(spec_of(), SOURCE, IMAGE)
    assert obj["apiVersion"] == "batch/v1"
    assert obj["metadata"]["name"] == "orders-dlq-3"  # the run of generation 3
    assert obj["metadata"]["namespace"] == "shop"
    assert obj["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "reconsume.io/v1alpha1",
            "kind": "DeadLetterJob",
            "name": "orders-dlq",
            "uid": "u-1",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    labels = obj["metadata"]["labels"]
    assert labels[JOB_LABEL] == "orders-dlq"
    assert labels[GROUP_LABEL] == "orders-consumer"
    assert labels["app.kubernetes.io/managed-by"] == "reconsume-operator"
    assert labels["app.kubernetes.io/component"] == "dead-letter-job"
    assert obj["spec"]["backoffLimit"] == 0
    pod = obj["spec"]["template"]["spec"]
    assert obj["spec"]["template"]["metadata"]["labels"] == labels
    assert pod["restartPolicy"] == "Never"
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert pod["automountServiceAccountToken"] is False  # local mode needs no API access
    assert "serviceAccountName" not in pod
    main = container(obj)
    assert main["image"] == IMAGE
    assert main["command"] == command(spec_of(), SOURCE, IMAGE)
    assert main["terminationMessagePolicy"] == "FallbackToLogsOnError"
    assert main["securityContext"] == {
        "runAsNonRoot": True,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    # 1g of driver memory plus the Python driver's overhead, max(384 MiB, 40 %), plus one
    # task slot's Python worker (256 MiB)
    assert main["resources"] == {
        "requests": {"cpu": "1", "memory": "1689Mi"},
        "limits": {"memory": "1689Mi"},
    }
    assert "env" not in main


def test_in_kubernetes_mode_the_driver_pod_gets_its_account_and_addresses() -> None:
    spec = spec_of(spark={"master": K8S, "conf": {"spark.kubernetes.namespace": "elsewhere"}})
    obj = job(spec, SOURCE, IMAGE)
    pod = obj["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "orders-dlq-spark"
    assert "automountServiceAccountToken" not in pod
    main = container(obj)
    env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in main["env"]}
    assert env == {"POD_IP": "status.podIP", "POD_NAME": "metadata.name"}
    conf = conf_flags(main["command"])
    assert conf["spark.kubernetes.namespace"] == "shop"  # not overridable
    assert conf["spark.kubernetes.authenticate.driver.serviceAccountName"] == "orders-dlq-spark"
    assert conf["spark.driver.host"] == "$(POD_IP)"
    assert conf["spark.kubernetes.driver.pod.name"] == "$(POD_NAME)"
    assert conf["spark.kubernetes.container.image"] == IMAGE
    assert conf["spark.executor.instances"] == "1"
    # The executors carry the run's label (a BrokerCluster's NetworkPolicy admits it).
    assert conf[f"spark.kubernetes.executor.label.{JOB_LABEL}"] == "orders-dlq"


def test_rbac_only_in_kubernetes_mode() -> None:
    assert rbac(spec_of()) == []
    assert rbac(spec_of(spark={"master": "spark://m:7077"})) == []
    account, role, binding = rbac(spec_of(spark={"master": K8S}))
    assert (account["kind"], role["kind"], binding["kind"]) == (
        "ServiceAccount",
        "Role",
        "RoleBinding",
    )
    assert {o["metadata"]["name"] for o in (account, role, binding)} == {"orders-dlq-spark"}
    (rule,) = role["rules"]
    assert rule["apiGroups"] == [""]
    assert set(rule["resources"]) == {"pods", "services", "configmaps", "persistentvolumeclaims"}
    assert set(rule["verbs"]) == {
        "create", "get", "list", "watch", "delete", "deletecollection", "patch",
    }  # fmt: skip
    assert binding["roleRef"]["name"] == "orders-dlq-spark"
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "orders-dlq-spark", "namespace": "shop"}
    ]
    assert all(o["metadata"]["ownerReferences"][0]["uid"] == "u-1" for o in (account, role))


def test_a_schedule_gets_a_forbidding_cron_job_with_the_same_pod_template() -> None:
    spec = spec_of(schedule="*/30 * * * *")
    obj = cron_job(spec, SOURCE, IMAGE, suspend=True)
    assert obj["metadata"]["name"] == "orders-dlq"
    assert obj["spec"]["schedule"] == "*/30 * * * *"
    assert obj["spec"]["concurrencyPolicy"] == "Forbid"
    assert obj["spec"]["suspend"] is True
    template = obj["spec"]["jobTemplate"]
    assert template["metadata"]["labels"][JOB_LABEL] == "orders-dlq"
    assert template["metadata"]["annotations"] == {
        JOB_LABEL: "orders-dlq",
        GROUP_LABEL: "orders-consumer",
    }
    assert template["spec"] == job(spec, SOURCE, IMAGE)["spec"]


def test_a_spark_application_in_cluster_mode() -> None:
    spec = spec_of(
        filter="tags = 'a'",
        spark={
            "master": K8S,
            "image": "my/dlq:2",
            "driver": {"cores": 2, "memory": "3g"},
            "executor": {"instances": 5, "cores": 2, "memory": "4g"},
            "conf": {"spark.sql.shuffle.partitions": "16"},
        },
    )
    app = spark_application(spec, SOURCE, "my/dlq:2", "local:///opt/reconsume/dlq_main.py")
    assert app["apiVersion"] == "sparkoperator.k8s.io/v1beta2"
    assert app["kind"] == "SparkApplication"
    assert app["metadata"]["name"] == "orders-dlq-3"
    body = app["spec"]
    assert (body["type"], body["mode"], body["image"]) == ("Python", "cluster", "my/dlq:2")
    assert body["mainApplicationFile"] == "local:///opt/reconsume/dlq_main.py"
    assert body["arguments"] == [
        "reprocess", "--name-server", "ns1:9876;ns2:9876", "--group", "GID_orders",
        "--job", "shop/orders-dlq", "--filter", "tags = 'a'", "--master", K8S,
        "--termination-log", "/dev/termination-log",
    ]  # fmt: skip
    assert body["driver"]["cores"] == 2
    assert body["driver"]["memory"] == "3g"
    assert body["driver"]["serviceAccount"] == "orders-dlq-spark"
    assert (body["executor"]["instances"], body["executor"]["memory"]) == (5, "4g")
    assert body["sparkConf"]["spark.sql.shuffle.partitions"] == "16"
    assert body["sparkConf"]["spark.kubernetes.namespace"] == "shop"
    assert "spark.driver.host" not in body["sparkConf"]  # spark-operator runs the driver pod
    assert body["restartPolicy"] == {"type": "Never"}


def test_long_names_are_shortened_distinctly_within_the_kubernetes_limits() -> None:
    long_a, long_b = "a" * 200 + "-x", "a" * 200 + "-y"
    for name in (long_a, long_b):
        spec = job_spec(resource(name=name, generation=12))
        assert len(run_name(spec)) <= JOB_NAME_MAX
        assert run_name(spec).endswith("-12")
        assert len(cron_job_name(spec)) <= CRON_JOB_NAME_MAX
        assert len(label_value(name)) <= 63
    assert label_value(long_a) != label_value(long_b)
    assert bounded_name("short", "-1", 63) == "short-1"
    assert bounded_name("a" * 60 + "-" + "b" * 10, "", 63)[:52] == "a" * 52


@pytest.mark.parametrize(
    ("text", "mib"), [("1g", 1024), ("512m", 512), ("768", 768), ("1t", 1048576), ("2048k", 2)]
)
def test_spark_memory_in_mebibytes(text: str, mib: int) -> None:
    assert memory_mib(text) == mib


# ------------------------------------------------------------------ status
RESULT = {
    "phase": "Succeeded",
    "action": "Reprocess",
    "group": "GID_orders",
    "job": "shop/orders-dlq",
    "dryRun": False,
    "counts": {
        "read": 12,
        "matched": 6,
        "archived": 0,
        "resent": 6,
        "purged": 0,
        "kept": 6,
        "skipped": 0,
    },
    "offsets": {
        "start": {"%DLQ%GID_orders": {"broker-a:0": 0, "broker-b:0": 3}},
        "end": {"%DLQ%GID_orders": {"broker-b:0": 9, "broker-a:0": 6}},
    },
    "startTime": "2026-11-21T10:00:00Z",
    "completionTime": "2026-11-21T10:00:09Z",
}


def a_job(*conditions: tuple[str, str], active: int = 0) -> dict[str, Any]:
    status: dict[str, Any] = {"startTime": "2026-11-21T09:59:58Z", "active": active}
    status["conditions"] = [
        {"type": kind, "status": "True", "reason": reason, "lastTransitionTime": "t"}
        for kind, reason in conditions
    ]
    return {"metadata": {"name": "orders-dlq-3"}, "status": status}


def a_pod(message: str, code: int = 0) -> dict[str, Any]:
    terminated = {"exitCode": code, "message": message}
    return {"status": {"containerStatuses": [{"name": "dlq", "state": {"terminated": terminated}}]}}


def test_a_job_is_pending_then_running_then_succeeded_with_the_results_counts() -> None:
    assert job_state(a_job(), None).phase == PENDING
    running = job_state(a_job(active=1), None)
    assert (running.phase, running.ready, running.fields["jobName"]) == (
        RUNNING,
        True,
        "orders-dlq-3",
    )
    done = job_state(a_job(("Complete", "")), a_pod(json.dumps(RESULT)))
    assert (done.phase, done.ready, done.reason) == (SUCCEEDED, True, "Succeeded")
    assert done.fields["counts"]["resent"] == 6
    assert done.fields["startTime"] == "2026-11-21T10:00:00Z"
    assert done.fields["completionTime"] == "2026-11-21T10:00:09Z"
    assert done.fields["offsets"] == [
        {"broker": "broker-a", "queueId": 0, "start": 0, "end": 6},
        {"broker": "broker-b", "queueId": 0, "start": 3, "end": 9},
    ]
    assert "read 12, matched 6, resent 6, kept 6" in done.message


def test_a_failed_run_reports_the_results_reason_even_from_the_log() -> None:
    result = {**RESULT, "phase": "Failed", "reason": "InvalidFilter", "message": "bad filter"}
    result.pop("counts")
    log = "WARN spark something\n" + json.dumps(result) + "\n"
    for message in (json.dumps(result), log):
        failed = job_state(a_job(("Failed", "BackoffLimitExceeded")), a_pod(message, 1))
        assert (failed.phase, failed.ready, failed.reason) == (FAILED, False, "InvalidFilter")
        assert failed.message == "bad filter"
    assert parse_result("no json here") is None


def test_a_run_that_died_without_a_result_fails_with_what_kubernetes_and_its_log_say() -> None:
    failed = job_state(a_job(("Failed", "BackoffLimitExceeded")), a_pod("Traceback: boom", 137))
    assert (failed.phase, failed.reason) == (FAILED, "JobFailed")
    assert "BackoffLimitExceeded" in failed.message
    assert "exit code 137" in failed.message
    assert "Traceback: boom" in failed.message
    assert "counts" not in failed.fields
    gone = job_state(a_job(("Complete", "")), None)
    assert gone.phase == SUCCEEDED
    assert "no result" in gone.message


def test_a_spark_applications_state_is_mirrored() -> None:
    def app(state: str, error: str | None = None) -> dict[str, Any]:
        application = {"state": state, **({"errorMessage": error} if error else {})}
        return {"metadata": {"name": "orders-dlq-3"}, "status": {"applicationState": application}}

    assert spark_state(app(""), None).phase == PENDING
    assert spark_state(app("SUBMITTED"), None).phase == RUNNING
    assert "RUNNING" in spark_state(app("RUNNING"), None).message
    assert spark_state(app("COMPLETED"), a_pod(json.dumps(RESULT))).fields["counts"]["read"] == 12
    failed = spark_state(app("FAILED", "driver OOMKilled"), None)
    assert (failed.phase, failed.reason) == (FAILED, "JobFailed")
    assert "driver OOMKilled" in failed.message


def test_offsets_skip_what_is_not_a_queue_and_keep_to_the_schema_bound() -> None:
    offsets = {"start": {"t": {f"b:{i}": i for i in range(300)} | {"nonsense": 1, "b:x": 2}}}
    listed = offsets_list(offsets)
    assert len(listed) == 256
    assert listed[0] == {"broker": "b", "queueId": 0, "start": 0}


def test_status_documents_fit_the_crd_and_replace_the_previous_run() -> None:
    schema = root_schema(CRDS["DeadLetterJob"])["properties"]["status"]
    counts_in_crd = set(schema["properties"]["counts"]["properties"])
    done = job_state(a_job(("Complete", "")), a_pod(json.dumps(RESULT)))
    document = status_document(None, 3, NOW, done)
    problems = validate(schema, {k: v for k, v in document.items() if v is not None})
    # counts the CRD does not define (yet) are the only problems; the API server prunes them
    assert all(any(f".counts.{key}" in p for key in set(RESULT["counts"]) - counts_in_crd)
               for p in problems), problems  # fmt: skip
    assert document["observedGeneration"] == 3
    (ready,) = document["conditions"]
    assert (ready["type"], ready["status"], ready["reason"]) == ("Ready", "True", "Succeeded")

    waiting = RunState(PENDING, False, "WaitingForJob", "waiting for Job other-1")
    after = status_document(document, 4, NOW, waiting)
    assert after["counts"] is None  # removed by the merge patch
    assert after["jobName"] is None
    assert after["phase"] == PENDING
    assert after["conditions"][0]["reason"] == "WaitingForJob"
    assert not validate(schema, {k: v for k, v in after.items() if v is not None})


def test_pruned_counts_are_no_change_and_a_run_is_counted_when_it_first_finishes() -> None:
    done = job_state(a_job(("Complete", "")), a_pod(json.dumps(RESULT)))
    document = status_document(None, 3, NOW, done)
    stored = {**document, "counts": {k: document["counts"][k] for k in ("read", "resent")}}
    stored = {k: v for k, v in stored.items() if v is not None}
    assert not status_changed(stored, status_document(stored, 3, NOW, done))
    assert status_changed(stored, status_document(stored, 4, NOW, done))
    assert newly_finished({"jobName": "orders-dlq-3", "phase": "Running"}, done)
    assert not newly_finished(stored, done)
    assert newly_finished({"jobName": "orders-dlq-2", "phase": "Succeeded"}, done)
    assert not newly_finished(None, job_state(a_job(active=1), None))


def test_the_dlq_jobs_image_and_entry_point_are_operator_settings() -> None:
    defaults = OperatorConfig.from_env({})
    assert defaults.dlq_jobs_image == f"ghcr.io/reconsume/dlq-jobs:{__version__}"
    assert defaults.dlq_jobs_main_file.startswith("local:///")
    config = OperatorConfig.from_env(
        {"RECONSUME_DLQ_JOBS_IMAGE": "my/dlq:3", "RECONSUME_DLQ_JOBS_MAIN_FILE": "local:///m.py"}
    )
    assert (config.dlq_jobs_image, config.dlq_jobs_main_file) == ("my/dlq:3", "local:///m.py")


@pytest.mark.parametrize(
    ("master", "cores", "runs", "memory"),
    [
        ("local[*]", 1, "local[1]", "256Mi"),
        ("local[*]", 3, "local[3]", "768Mi"),
        ("local[*,2]", 2, "local[2,2]", "512Mi"),
        ("local[4]", 1, "local[4]", "1024Mi"),
        ("local", 2, "local", "256Mi"),
        ("spark://master:7077", 2, "spark://master:7077", "0Mi"),
    ],
)
def test_a_local_master_runs_the_pods_cores_and_sizes_their_workers(
    master: str, cores: int, runs: str, memory: str
) -> None:
    spec = spec_of(spark={"master": master, "driver": {"cores": cores, "memory": "512m"}})
    argv = command(spec, SOURCE, IMAGE)
    assert argv[argv.index("--master") + 1] == runs
    # 512m heap + 384 MiB overhead + 256 MiB per local task slot
    requested = int(driver_resources(spec)["requests"]["memory"].removesuffix("Mi"))
    assert requested - 512 - 384 == int(memory.removesuffix("Mi"))
