"""What admission costs the API server: one call of the webhook per managed pod.

The mutating webhook seals what it writes (``sluicegate.dev/seal``); the validating pod webhook's
condition ``sealed-as-admitted`` rebuilds the seal in CEL from the pod about to be stored and
skips the final check when nothing changed. These tests count the webhook's own answers
(``sluicegate_admission_requests_total``), for pods whose seals hold every kind of key and value
Sluicegate writes, so a difference between policy's ``seal`` and the CEL expression shows as a
second call. That a pod a later webhook changed still reaches the final check and is refused is
``test_webhook_process.py::test_a_pod_that_a_later_webhook_ungates_is_refused_by_the_final_check``.
"""

from __future__ import annotations

import urllib.request
from collections import Counter
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from controlplane.deploying import LocalSluicegate
from policy import keys
from process import kubeyaml
from tests.builders import MakePreset, MakeQueue
from tests.e2e.projects import Project, gpu_pod

HOLD = 0  # queues that dispatch nothing: what admission wrote stays as it left it


def answers(running: LocalSluicegate) -> Counter[tuple[str, str, str, str]]:
    """The webhook's answers so far: (webhook, operation, kind, result) → count. The webhook
    (mutate or validate) is read from the latency histogram's count, the rest from the counter."""
    port = running.port("webhook", "metrics")
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    out: Counter[tuple[str, str, str, str]] = Counter()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "sluicegate_admission_requests_total":
                labels = sample.labels
                out["", labels["operation"], labels["kind"], labels["result"]] += int(sample.value)
            elif sample.name == "sluicegate_admission_duration_seconds_count":
                out[sample.labels["webhook"], "", "", ""] += int(sample.value)
    return out


def test_each_managed_pod_is_admitted_with_one_call_of_the_webhook(
    project: Project, running: LocalSluicegate
) -> None:
    train = project.name("train")
    preset = project.name("small")
    project.create(MakeQueue(train).priority(10).access().max_running(HOLD).obj(),
                   MakePreset(preset).strategy("isnull").queue(train).obj())
    project.opt_in(default_queue=train)
    # Users and groups with characters a seal must count right: non-ASCII, quotes, a comma.
    alice = project.user("alice", "vision-devs", "équipe-ü", 'q"uote,d')

    def pods() -> list[dict[str, Any]]:
        made = [gpu_pod(f"plain-{i}", project.namespace) for i in range(4)]
        made.append(gpu_pod("queued", project.namespace, **{keys.QUEUE_LABEL: train}))
        swept = gpu_pod("swept", project.namespace, **{keys.WORKFLOW_LABEL: "sweep-1"})
        swept["metadata"]["annotations"][keys.WORKFLOW_MAX_RUNNING_ANNOTATION] = "3"
        made.append(swept)
        for member in range(2):
            grouped = gpu_pod(f"ring-{member}", project.namespace, **{keys.GROUP_LABEL: "ring"})
            grouped["metadata"]["annotations"][keys.GROUP_SIZE_ANNOTATION] = "2"
            made.append(grouped)
        preset_pod = gpu_pod("preset", project.namespace)
        preset_pod["metadata"]["annotations"][keys.PRESETS_ANNOTATION] = preset
        made.append(preset_pod)
        other_gate = gpu_pod("other-gate", project.namespace)
        other_gate["spec"]["schedulingGates"] = [{"name": "example.com/hold"}]
        made.append(other_gate)
        return made

    made = pods()
    before = answers(running)
    alice.run("create", "-f", "-", input=kubeyaml.dump_all(made))
    grew = answers(running) - before

    for pod in made:
        stored = project.pod(pod["metadata"]["name"])
        assert {"name": keys.GATE} in stored["spec"]["schedulingGates"]
        assert keys.SEAL_ANNOTATION in stored["metadata"]["annotations"]
    assert grew == Counter({("mutate", "", "", ""): len(made), ("", "CREATE", "Pod", "patched"): len(made)})


def test_a_seal_written_by_hand_is_refused_at_the_first_call(
    project: Project, running: LocalSluicegate
) -> None:
    train = project.name("train")
    project.create(MakeQueue(train).priority(10).access().max_running(HOLD).obj())
    project.opt_in(default_queue=train)
    pod = gpu_pod("forged", project.namespace)
    pod["metadata"]["annotations"][keys.SEAL_ANNOTATION] = "lsluicegate.dev/queue=1:x"
    before = answers(running)
    message = project.user("alice", "vision-devs").fails("create", "-f", "-", input=kubeyaml.dump(pod))
    grew = answers(running) - before
    assert f"annotation {keys.SEAL_ANNOTATION} does not match" in message
    assert grew[("mutate", "", "", "")] == 1
    assert grew[("", "CREATE", "Pod", "denied")] == 1
