"""Reading manifests for embedded mode: files and directories, several documents, Lists, other
kinds left alone, and problems that name the file (and document), the object and the field."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from reconsume.embedded.manifests import load, manifest_files
from reconsume.errors import InvalidArgumentError

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples"

GROUP = """
apiVersion: reconsume.io/v1alpha1
kind: ConsumerGroup
metadata:
  name: {name}
spec:
  cluster: orders
  retry:
    maxTimes: {max_times}
"""


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text))
    return path


def test_the_examples_load_with_their_defaults() -> None:
    loaded = load([EXAMPLES])
    assert loaded.problems == []
    assert loaded.ignored == []
    kinds = sorted((m.kind, m.name) for m in loaded.manifests)
    assert len(kinds) == len(list(EXAMPLES.glob("*.yaml")))
    group = loaded.by_key()[("ConsumerGroup", "default", "orders-consumer")]
    assert group.spec["retry"]["queueNums"] == 2
    assert group.spec["messageModel"] == "Clustering"
    cluster = loaded.by_key()[("BrokerCluster", "default", "orders")]
    assert cluster.spec["nameServers"] == 1


def test_a_problem_names_file_document_object_and_field(tmp_path: Path) -> None:
    path = write(tmp_path / "groups.yaml", GROUP.format(name="a", max_times=3) + "---"
                 + GROUP.format(name="b", max_times=-7))  # fmt: skip
    loaded = load([path])
    assert [m.name for m in loaded.manifests] == ["a"]
    (problem,) = loaded.problems
    assert str(problem).startswith(
        f"{path} (document 2): ConsumerGroup b: spec.retry.maxTimes: Invalid value: -7"
    )


def test_yaml_errors_name_the_line(tmp_path: Path) -> None:
    path = write(tmp_path / "broken.yaml", "kind: Topic\nmetadata: {name: [x\n")
    loaded = load([path])
    (problem,) = loaded.problems
    assert str(problem).startswith(f"{path}: is not valid YAML: line ")
    assert loaded.unreadable == {path}


def test_lists_other_kinds_and_duplicates(tmp_path: Path) -> None:
    write(tmp_path / "a.yaml", """
        apiVersion: v1
        kind: List
        items:
          - apiVersion: reconsume.io/v1alpha1
            kind: Topic
            metadata: {name: orders}
            spec: {cluster: shop}
          - apiVersion: apps/v1
            kind: Deployment
            metadata: {name: web}
    """)  # fmt: skip
    write(tmp_path / "b.yaml", """
        apiVersion: reconsume.io/v1alpha1
        kind: Topic
        metadata: {name: orders}
        spec: {cluster: shop, queues: 4}
    """)  # fmt: skip
    write(tmp_path / "notes.txt", "not a manifest")
    loaded = load([tmp_path])
    assert [(m.kind, m.name, m.spec["queues"]) for m in loaded.manifests] == [
        ("Topic", "orders", 8)
    ]
    assert loaded.ignored == [f"{tmp_path / 'a.yaml'} (document 2): Deployment web"]
    (problem,) = loaded.problems
    assert str(problem) == (
        f"{tmp_path / 'b.yaml'}: Topic orders: also declared in {tmp_path / 'a.yaml'} (document 1)"
    )


def test_unknown_kinds_of_our_group_and_missing_paths(tmp_path: Path) -> None:
    path = write(tmp_path / "x.yaml", """
        apiVersion: reconsume.io/v1alpha1
        kind: RetryPolicy
        metadata: {name: x}
    """)  # fmt: skip
    (problem,) = load([path]).problems
    assert str(problem).startswith(f"{path}: RetryPolicy x: kind: ")
    with pytest.raises(InvalidArgumentError, match="no-such: no such file or directory"):
        manifest_files([tmp_path / "no-such"])


def test_transition_rules_compare_with_what_was_applied(tmp_path: Path) -> None:
    path = write(tmp_path / "g.yaml", GROUP.format(name="a", max_times=3).replace(
        "cluster: orders", "cluster: orders\n  groupName: GID_new"))  # fmt: skip
    old = load([write(tmp_path / "old.yaml", GROUP.format(name="a", max_times=3).replace(
        "cluster: orders", "cluster: orders\n  groupName: GID_old"))]).manifests[0]  # fmt: skip
    (problem,) = load([path], applied={old.key: old.body}).problems
    assert "ConsumerGroup a: spec.groupName" in str(problem)
    assert "immutable" in str(problem)


def test_up_refuses_invalid_manifests_before_starting_anything(tmp_path: Path) -> None:
    manifests = tmp_path / "manifests"
    shutil.copytree(EXAMPLES, manifests)
    broken = manifests / "consumergroup.yaml"
    broken.write_text(broken.read_text().replace("queueNums: 2", "queueNums: 65"))
    result = subprocess.run(
        [sys.executable, "-m", "reconsume", "up", "-f", str(manifests), "--data-dir",
         str(tmp_path / "data"), "--port", "0"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [
        "reconsume up: invalid manifests, nothing started:",
        f"  {broken}: ConsumerGroup orders-consumer: spec.retry.queueNums: Invalid value: 65: "
        "should be less than or equal to 64",
    ]
    assert not (tmp_path / "data" / "default").exists()


def test_a_schedule_that_never_comes_due_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path / "job.yaml", """
        apiVersion: reconsume.io/v1alpha1
        kind: DeadLetterJob
        metadata: {name: never}
        spec: {consumerGroup: orders-consumer, action: Purge, schedule: "0 0 30 2 *"}
    """)  # fmt: skip
    (problem,) = load([path]).problems
    assert str(problem).startswith(f"{path}: DeadLetterJob never: spec.schedule: ")
    assert "never occurs" in str(problem)
