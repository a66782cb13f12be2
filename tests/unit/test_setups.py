"""Reading the Queues, Teams and Policy a simulation runs under, from a directory of YAML."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.setups import SetupError, load_setup

QUEUES = """\
apiVersion: sluicegate.dev/v1beta1
kind: Queue
metadata: {name: vision-train}
spec: {priority: 10, maxRunning: 8, quota: {nvidia.com/gpu: "16"}}
---
kind: Queue
metadata: {name: vision-debug}
spec: {ordering: StrictFIFO}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: not-ours}
---
apiVersion: sluicegate.dev/v1beta1
kind: Preset
metadata: {name: single-gpu}
spec: {queue: vision-train}
"""

LIST = """\
apiVersion: v1
kind: List
items:
- apiVersion: sluicegate.dev/v1beta1
  kind: Team
  metadata: {name: vision}
  spec: {maxRunning: 20, quota: {nvidia.com/gpu: "32"}}
- apiVersion: sluicegate.dev/v1beta1
  kind: Policy
  metadata: {name: cluster}
  spec: {maxRunning: 100, quota: {nvidia.com/gpu: "64"}, starvationSeconds: 300}
"""


def test_a_directory_of_yaml_files_and_lists_makes_one_setup(tmp_path: Path) -> None:
    (tmp_path / "queues.yaml").write_text(QUEUES)
    (tmp_path / "from-kubectl.yml").write_text(LIST)
    (tmp_path / "README.md").write_text("not read")
    setup = load_setup(tmp_path)
    assert list(setup.queues) == ["vision-debug", "vision-train"]
    assert setup.queues["vision-train"].quota == {"nvidia.com/gpu": 16000}
    assert setup.queues["vision-debug"].ordering.value == "StrictFIFO"
    assert setup.teams["vision"].max_running == 20
    assert (setup.policy.max_running, setup.policy.starvation_seconds) == (100, 300)
    assert setup.source == str(tmp_path)



def test_objects_written_as_v1alpha1_read_the_same_as_v1beta1(tmp_path: Path) -> None:
    (tmp_path / "beta").mkdir()
    (tmp_path / "beta" / "queues.yaml").write_text(QUEUES)
    (tmp_path / "alpha").mkdir()
    alpha_queues = QUEUES.replace("sluicegate.dev/v1beta1", "sluicegate.dev/v1alpha1")
    (tmp_path / "alpha" / "queues.yaml").write_text(alpha_queues)
    beta, alpha = load_setup(tmp_path / "beta"), load_setup(tmp_path / "alpha")
    assert list(alpha.queues) == ["vision-debug", "vision-train"]
    assert alpha.queues == beta.queues

@pytest.mark.parametrize(
    ("files", "message"),
    [
        (
            {"a.yaml": "kind: Queue\nmetadata: {name: a}\nspec: {maxRunning: -1}\n"},
            "a.yaml: Queue a: spec.maxRunning: must not be negative, got -1",
        ),
        (
            {"a.yaml": "kind: Queue\nmetadata: {name: a}\n", "b.yaml": "kind: Queue\nmetadata: {name: a}\n"},
            "b.yaml: Queue a is defined twice (also in",
        ),
        ({"a.yaml": "kind: Team\nmetadata: {name: t}\n"}, "no Queue objects"),
        ({"a.yaml": "kind: Queue\nmetadata: {name: a\n"}, "a.yaml: not YAML"),
        ({"a.yaml": "- just\n- a list\n"}, "a.yaml: expected a Kubernetes object, got list"),
        (
            {"a.yaml": "kind: Policy\nmetadata: {name: other}\n"},
            "the only Policy that counts is named 'cluster'",
        ),
        ({}, "no .yaml, .yml, .json files"),
    ],
    ids=[
        "a bad field",
        "a queue twice",
        "no queues",
        "broken YAML",
        "not an object",
        "a policy not named cluster",
        "an empty directory",
    ],
)
def test_a_setup_that_cannot_be_used_is_refused_naming_the_file(
    tmp_path: Path, files: dict[str, str], message: str
) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(SetupError, match=message.replace("(", r"\(").replace(".", r"\.")):
        load_setup(tmp_path)


def test_a_single_file_is_a_setup_too(tmp_path: Path) -> None:
    path = tmp_path / "one.yaml"
    path.write_text(QUEUES)
    assert list(load_setup(path).queues) == ["vision-debug", "vision-train"]
    with pytest.raises(SetupError, match="no such file or directory"):
        load_setup(tmp_path / "missing")
