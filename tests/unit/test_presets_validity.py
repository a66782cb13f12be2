"""Presets never take away what Kubernetes added, never leave requests and limits at odds, and
``isnull`` fills lists item by item.

Pods here look as admission receives them: the ServiceAccount admission plugin has added the
token volume and its mount, DefaultTolerationSeconds the not-ready and unreachable tolerations,
and defaulting has copied each limit to its request.
"""

from __future__ import annotations

from typing import Any

import pytest

from policy import keys
from policy.fields import InvalidObject
from policy.merging import apply_preset
from policy.presets import Preset
from tests.builders import MakePod, MakePreset

GPU = keys.GPU_RESOURCE
TOKEN = {"name": "kube-api-access-x7k2p", "projected": {"sources": [{"serviceAccountToken": {}}]}}
TOKEN_MOUNT = {
    "name": "kube-api-access-x7k2p",
    "mountPath": keys.SERVICE_ACCOUNT_TOKEN_PATH,
    "readOnly": True,
}
NOT_READY = {
    "key": "node.kubernetes.io/not-ready",
    "operator": "Exists",
    "effect": "NoExecute",
    "tolerationSeconds": 300,
}
UNREACHABLE = {
    "key": "node.kubernetes.io/unreachable",
    "operator": "Exists",
    "effect": "NoExecute",
    "tolerationSeconds": 300,
}
SHM = {"name": "shm", "emptyDir": {"medium": "Memory"}}
SHM_MOUNT = {"name": "shm", "mountPath": "/dev/shm"}
GPU_TAINT = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def as_admitted() -> MakePod:
    """A pod as it reaches admission, after Kubernetes' own admission plugins."""
    return (
        MakePod.submitted()
        .spec(volumes=[TOKEN])
        .main("volumeMounts", [TOKEN_MOUNT])
        .spec(tolerations=[NOT_READY, UNREACHABLE])
    )


def merged(pod: MakePod, preset: MakePreset) -> dict[str, Any]:
    return apply_preset(pod.obj(), Preset.parse(preset.obj()))


def main(pod: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = pod["spec"]["containers"][0]
    return container


# --- 8. what Kubernetes injected stays, under every strategy --------------------------------


@pytest.mark.parametrize("strategy", ["replace", "isnull", "post_merge", "pre_merge"])
def test_a_preset_keeps_the_token_volume_and_mount_kubernetes_added(strategy: str) -> None:
    pod = merged(
        as_admitted(),
        MakePreset("shm").strategy(strategy).pod("volumes", [SHM]).container("volumeMounts", [SHM_MOUNT]),
    )
    assert pod["spec"]["volumes"] == [SHM, TOKEN]
    assert main(pod)["volumeMounts"] == [SHM_MOUNT, TOKEN_MOUNT]


@pytest.mark.parametrize("strategy", ["replace", "isnull", "post_merge", "pre_merge"])
def test_a_preset_keeps_the_default_tolerations_kubernetes_added(strategy: str) -> None:
    pod = merged(as_admitted(), MakePreset("gpu-nodes").strategy(strategy).pod("tolerations", [GPU_TAINT]))
    assert pod["spec"]["tolerations"] == [GPU_TAINT, NOT_READY, UNREACHABLE]


def test_replace_still_replaces_what_the_user_wrote() -> None:
    pod = merged(
        as_admitted().spec(tolerations=[NOT_READY, {"key": "spot", "operator": "Exists"}]),
        MakePreset("gpu-nodes").pod("tolerations", [GPU_TAINT]),
    )
    assert pod["spec"]["tolerations"] == [GPU_TAINT, NOT_READY]


def test_a_preset_may_restate_an_injected_toleration_with_its_own_grace() -> None:
    patient = {**NOT_READY, "tolerationSeconds": 3600}
    pod = merged(as_admitted(), MakePreset("patient").pod("tolerations", [patient]))
    assert pod["spec"]["tolerations"] == [patient, UNREACHABLE]


# --- 8. requests and limits stay consistent ---------------------------------------------------

TWO_GPUS = MakePod.submitted().main("resources", {"requests": {GPU: "2"}, "limits": {GPU: "2"}})
CPU_LIMIT_2 = MakePod.submitted().main("resources", {"requests": {"cpu": "2"}, "limits": {"cpu": "2"}})
CPU_REQUEST_2 = MakePod.submitted().main("resources", {"requests": {"cpu": "2"}})


@pytest.mark.parametrize(
    ("pod", "preset", "resources"),
    [
        pytest.param(
            TWO_GPUS,
            MakePreset("one").limits(gpu="1"),
            {"requests": {GPU: "1"}, "limits": {GPU: "1"}},
            id="a GPU limit from a preset sets the request too: GPUs need request = limit",
        ),
        pytest.param(
            TWO_GPUS,
            MakePreset("one").requests(gpu="1"),
            {"requests": {GPU: "1"}, "limits": {GPU: "1"}},
            id="a GPU request from a preset sets the limit too",
        ),
        pytest.param(
            MakePod.submitted(),
            MakePreset("one").requests(gpu="1"),
            {"requests": {GPU: "1"}, "limits": {GPU: "1"}},
            id="a GPU request alone gets the limit a GPU needs",
        ),
        pytest.param(
            CPU_LIMIT_2,
            MakePreset("big").requests(cpu="4"),
            {"requests": {"cpu": "4"}, "limits": {"cpu": "4"}},
            id="a cpu request above the pod's limit raises the limit to it",
        ),
        pytest.param(
            CPU_REQUEST_2,
            MakePreset("small").limits(cpu="1"),
            {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}},
            id="a cpu limit below the pod's request lowers the request to it",
        ),
        pytest.param(
            CPU_LIMIT_2,
            MakePreset("some").requests(cpu="1"),
            {"requests": {"cpu": "1"}, "limits": {"cpu": "2"}},
            id="a consistent cpu request leaves the limit alone",
        ),
        pytest.param(
            TWO_GPUS,
            MakePreset("one").strategy("pre_merge").limits(gpu="1"),
            {"requests": {GPU: "2"}, "limits": {GPU: "2"}},
            id="pre_merge: the pod's GPUs win as a pair",
        ),
        pytest.param(
            CPU_REQUEST_2,
            MakePreset("small").strategy("isnull").limits(cpu="1"),
            {"requests": {"cpu": "2"}},
            id="isnull: a limit below the pod's own request is not filled in",
        ),
        pytest.param(
            CPU_REQUEST_2,
            MakePreset("roomy").strategy("isnull").limits(cpu="4"),
            {"requests": {"cpu": "2"}},
            id="isnull: a resource the pod names keeps its pair, even where the preset's limit would fit",
        ),
        pytest.param(
            CPU_REQUEST_2,
            MakePreset("roomy").strategy("isnull").limits(memory="4Gi"),
            {"requests": {"cpu": "2"}, "limits": {"memory": "4Gi"}},
            id="isnull: a resource the pod does not name takes the preset's",
        ),
    ],
)
def test_a_preset_sets_both_sides_of_a_resource_consistently(
    pod: MakePod, preset: MakePreset, resources: dict[str, Any]
) -> None:
    result = merged(pod, preset)
    assert main(result)["resources"] == resources
    assert apply_preset(result, Preset.parse(preset.obj())) == result


@pytest.mark.parametrize(
    ("preset", "message"),
    [
        pytest.param(
            MakePreset("p").requests(gpu="1").limits(gpu="2"),
            "Preset p: spec.container.resources requests 1 nvidia.com/gpu but its limit is 2; "
            "nvidia.com/gpu needs request = limit",
            id="a preset whose GPU request and limit differ is refused",
        ),
        pytest.param(
            MakePreset("p").requests(cpu="4").limits(cpu="2"),
            "Preset p: spec.container.resources requests 4 cpu, more than its limit 2",
            id="a preset whose cpu request exceeds its limit is refused",
        ),
    ],
)
def test_a_preset_at_odds_with_itself_is_refused(preset: MakePreset, message: str) -> None:
    with pytest.raises(InvalidObject) as caught:
        Preset.parse(preset.obj())
    assert str(caught.value) == message


# --- 9. isnull fills lists item by item -----------------------------------------------------


@pytest.mark.parametrize(
    ("field", "preset", "expected"),
    [
        pytest.param(
            ("spec", "volumes"),
            MakePreset("shm").strategy("isnull").pod("volumes", [SHM]),
            [SHM, TOKEN],
            id="a volume is added beside the token volume, which stays last",
        ),
        pytest.param(
            ("main", "volumeMounts"),
            MakePreset("shm").strategy("isnull").container("volumeMounts", [SHM_MOUNT]),
            [SHM_MOUNT, TOKEN_MOUNT],
            id="a mount is added beside the token mount",
        ),
        pytest.param(
            ("spec", "tolerations"),
            MakePreset("gpu")
            .strategy("isnull")
            .pod("tolerations", [GPU_TAINT, {**NOT_READY, "tolerationSeconds": 1}]),
            [GPU_TAINT, NOT_READY, UNREACHABLE],
            id="a toleration is added beside the defaults, and one the pod has is kept as it is",
        ),
        pytest.param(
            ("main", "env"),
            MakePreset("env")
            .strategy("isnull")
            .container("env", [{"name": "MODE", "value": "preset"}, {"name": "NCCL", "value": "1"}]),
            [{"name": "MODE", "value": "pod"}, {"name": "NCCL", "value": "1"}],
            id="one env var of the pod's does not block the preset's others",
        ),
    ],
)
def test_isnull_adds_each_item_the_pod_has_none_of(
    field: tuple[str, str], preset: MakePreset, expected: list[Any]
) -> None:
    pod = merged(as_admitted().env("MODE", "pod"), preset)
    where, name = field
    assert (main(pod) if where == "main" else pod["spec"])[name] == expected
