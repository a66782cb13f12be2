"""Every command of docs/cli.md runs, as written, against the real cluster with Sluicegate."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from controlplane.deploying import LocalSluicegate
from controlplane.launching import LocalCluster
from tests.doc_commands import ROOT, commands_in, run, shell_env
from tests.e2e.conftest import eventually
from tests.e2e.scenes import Scene

DOC = ROOT / "docs" / "cli.md"
PODS = "docs/examples/cli-pods.yaml"
NS = "vision-research"
SAMPLE_NAMESPACES = ("vision-research", "vision-notebooks", "nlp-research")
UNPLACEABLE = "dispatched, waiting for Kubernetes to place it: "
DRY_RUN = f"kubectl apply -f {PODS} --as alice --as-group vision-devs --dry-run=server"


def _condition(scene: Scene, pod: str) -> dict[str, str]:
    return scene.condition(NS, pod) or {}


def _settled(scene: Scene) -> bool:
    """The examples' pods show what the document says they show."""
    return (_condition(scene, "train-c").get("status") == "False"
            and _condition(scene, "trial-1").get("reason") == "NoNodeFits"
            and _condition(scene, "paired").get("message", "").startswith(UNPLACEABLE)
            and scene.get("pod", "quick", NS).get("status", {}).get("phase") == "Succeeded")


@pytest.fixture
def samples(cluster: LocalCluster, running: LocalSluicegate) -> Iterator[None]:
    """The document starts from the sample setup; afterwards it is removed again (the Policy
    among it would bind every other test), and its namespaces are gone before the next test."""
    yield
    cluster.kubectl("delete", "-f", str(ROOT / PODS), "--ignore-not-found", "--wait=false", check=False)
    cluster.kubectl("delete", "-k", str(ROOT / "manifests" / "samples"), "--ignore-not-found", "--wait=false",
                    check=False)
    eventually(lambda: not cluster.kubectl("get", "namespace", *SAMPLE_NAMESPACES, check=False).stdout,
               f"the sample namespaces {SAMPLE_NAMESPACES} to be deleted")


def test_every_command_in_the_cli_guide_runs_as_written(cluster: LocalCluster, samples: None) -> None:
    commands = commands_in(Path(DOC))
    assert any(c.text.startswith("kubectl sluicegate ") for c in commands)
    assert {c.text.split()[1] for c in commands if c.text.startswith("sluicegate ")} == {
        "queues", "pods", "explain"}
    env = shell_env(cluster)
    scene = Scene(cluster)
    for command in commands:
        result = run(command, env)
        assert result.returncode == 0, f"{command}\n{result.stderr}"
        if command.text == "kubectl apply -k manifests/samples":
            # Admission judges against its cache of Queues and Presets, which its watch fills on
            # its own time: the next command's pods wait until a server dry run admits them.
            eventually(lambda: run(DRY_RUN, env).returncode == 0, "admission to know the sample Queues")
        if PODS in command.text and "apply" in command.text:
            eventually(lambda: _settled(scene), "the example pods to be held, unplaceable and finished")
        elif "sluicegate" in command.text:
            assert result.stdout.strip(), f"{command} printed nothing"
        if command.text.startswith("sluicegate explain train-c"):
            assert result.stdout.startswith("held by Sluicegate: "), result.stdout
        if command.text.startswith("sluicegate explain trial-1"):
            assert result.stdout.startswith("held by Sluicegate: NoNodeFits: no node is in queue sweeps"), \
                result.stdout
        if command.text.startswith("sluicegate explain paired"):
            assert result.stdout.startswith(UNPLACEABLE), result.stdout
        if command.text.startswith("sluicegate explain quick"):
            assert result.stdout.startswith("finished: Succeeded"), result.stdout
