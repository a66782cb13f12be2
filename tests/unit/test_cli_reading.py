"""What the CLI answers with less than cluster-wide rights, and how it reads a user's kubeconfig
(no cluster): the Queue status and the pods' own conditions as fallbacks, impersonation, and
malformed kubeconfigs in one line."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from cli.leadership import stalled
from cli.standings import HELD, UNDECIDED, UNPLACEABLE_STATE, Observation, from_conditions, stand, status_rows
from cli.stories import render, tell
from kube.connecting import ConfigurationError
from kube.reading import check_kubeconfig, impersonation
from policy import keys
from tests.builders import T0, MakeNamespace, MakePod, MakeQueue

Obj = dict[str, Any]


def held(pod: MakePod, reason: str, message: str) -> Obj:
    """The pod as the controller left it: gated, with its Dispatched condition."""
    obj = pod.gated().obj()
    obj.setdefault("status", {}).setdefault("conditions", []).append(
        {"type": keys.CONDITION, "status": "False", "reason": reason, "message": message})
    return obj


def pod(name: str, queue: str, at: float = 0.0) -> MakePod:
    return MakePod("vision-research", name).queue(queue).team("vision").gpus(2).created(at).admitted(at)


def test_a_namespace_reader_gets_its_pending_pods_with_their_conditions_and_no_position() -> None:
    words = "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."
    pods = [held(pod("b", "train", at=5), "QueueLimit", "queue train: 8/8 running"),
            held(pod("a", "train", at=1), "QueueLimit", "queue train: 8/8 running"),
            pod("new", "train", at=9).gated().obj(),  # the controller has not written its condition yet
            pod("huge", "train").unschedulable(words).obj(),
            pod("runs", "train").running("n1").obj()]
    seen = Observation(queues=[MakeQueue("train").obj()],
                       namespaces=[MakeNamespace("vision-research").team("vision").obj()],
                       pods=pods, now=T0 + 100)
    entries = from_conditions(seen)
    assert [(e.name, e.state, e.reason, e.position) for e in entries] == [
        ("a", HELD, "QueueLimit", None), ("b", HELD, "QueueLimit", None), ("new", HELD, "", None),
        ("huge", UNPLACEABLE_STATE, "Dispatched", None)]
    assert entries[0].message == "queue train: 8/8 running" and entries[0].gpus == 2
    assert entries[2].message == UNDECIDED
    assert entries[0].waited == 99.0


def test_a_namespace_reader_sees_a_pod_held_because_its_namespace_left_its_team() -> None:
    """The namespace lost its team label: its gated pods are held, and the controller says why on
    them; a pod of an opted-in namespace that admission never marked is not listed."""
    words = ("namespace vision-research is no longer opted in to team vision, which admitted this pod to "
             "queue train")
    unmarked = MakePod("nlp", "b").queue("train").team("nlp").gpus(1).gated().obj()
    namespaces = [MakeNamespace("vision-research").obj(), MakeNamespace("nlp").team("nlp").obj()]
    seen = Observation(namespaces=namespaces,
                       pods=[held(pod("a", "train"), "NamespaceLeftTeam", words), unmarked], now=T0)
    assert [(e.name, e.state, e.reason, e.message) for e in from_conditions(seen)] == [
        ("a", HELD, "NamespaceLeftTeam", words)]


def test_queues_from_their_status_show_what_the_controller_wrote() -> None:
    train = MakeQueue("train").priority(5).max_running(8).obj()
    train["status"] = {"pending": 3, "running": 8, "display": {"running": "8/8", "gpus": "16/16"},
                       "oldestPendingTime": "2026-01-01T00:00:00Z"}
    idle = MakeQueue("idle").obj()  # never written by a controller
    now = datetime.fromisoformat("2026-01-01T00:01:30+00:00").timestamp()
    rows = status_rows([idle, train], now)
    assert [(r.name, r.priority, r.running, r.pending, r.gpus, r.oldest_wait) for r in rows] == [
        ("train", 5, "8/8", 3, "16/16", 90.0), ("idle", 0, "-", 0, "-", None)]
    assert rows[0].never is None and rows[0].unplaceable is None


def test_impersonation_in_the_kubeconfig_becomes_the_impersonate_headers() -> None:
    assert impersonation({"token": "t"}, "k") == {}
    assert impersonation({"as": "alice", "as-groups": ["vision-devs"], "as-uid": "42"}, "k") == {
        "Impersonate-User": "alice", "Impersonate-Uid": "42", "Impersonate-Group": "vision-devs"}


@pytest.mark.parametrize(("user", "words"), [
    ({"as": "alice", "as-groups": ["a", "b"]}, "impersonating several groups"),
    ({"as": "alice", "as-user-extra": {"scopes": ["x"]}}, "as-user-extra is not supported"),
    ({"as-groups": ["a"]}, "without as"),
])
def test_impersonation_the_headers_cannot_carry_is_refused_in_one_line(user: Obj, words: str) -> None:
    with pytest.raises(ConfigurationError) as refused:
        impersonation(user, "k")
    assert words in str(refused.value) and "\n" not in str(refused.value)


@pytest.mark.parametrize(("text", "words"), [
    ("apiVersion: v1\nclusters: [\n  - name: x\nusers: {", "not valid YAML (line "),
    ("", "is empty"),
    ("just a string\n", "is not a kubeconfig"),
])
def test_a_malformed_kubeconfig_is_one_line(tmp_path: Path, text: str, words: str) -> None:
    path = tmp_path / "config"
    path.write_text(text)
    with pytest.raises(ConfigurationError) as refused:
        check_kubeconfig(str(path))
    assert str(refused.value).startswith(f"kubeconfig {path}: {words}") and "\n" not in str(refused.value)


def test_a_malformed_kubeconfig_through_the_command_is_one_line_and_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from cli.__main__ import main

    path = tmp_path / "config"
    path.write_text("a: [\n")
    assert main(["queues", "--kubeconfig", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"sluicegate: kubeconfig {path}: not valid YAML (line ") and err.count("\n") == 1
    assert main(["pods", "--kubeconfig", "/dev/null"]) == 1
    assert capsys.readouterr().err == "sluicegate: kubeconfig /dev/null: is empty\n"


def lease(holder: str, renewed: str, seconds: int = 15) -> Obj:
    return {"spec": {"holderIdentity": holder, "renewTime": renewed, "leaseDurationSeconds": seconds}}


def test_a_lease_renewed_within_its_duration_means_a_controller_is_at_work() -> None:
    now = datetime.fromisoformat("2026-01-01T00:00:10+00:00").timestamp()
    assert stalled(lease("c-1", "2026-01-01T00:00:00.000000Z"), now, where="ns/l") == ""
    assert stalled(lease("c-1", "2026-01-01T00:00:00.000000Z", 5), now, where="ns/l") == (
        "no gate controller holds the lease (since 2026-01-01T00:00:05Z): nothing is being released")
    assert stalled(lease("", "2026-01-01T00:00:00.000000Z", 1), now, where="ns/l") == (
        "no gate controller holds the lease (since 2026-01-01T00:00:00Z): nothing is being released")
    assert stalled(None, now, where="ns/l") == (
        "no gate controller holds the lease (there is no Lease ns/l): nothing is being released")


def test_a_pod_that_fits_now_counts_as_pending_and_without_a_controller_is_not_about_to_go() -> None:
    seen = Observation(queues=[MakeQueue("train").max_running(8).obj()],
                       namespaces=[MakeNamespace("vision-research").team("vision").obj()],
                       pods=[pod("dead-1", "train", at=1).gated().obj()], now=T0 + 70)
    standing = stand(seen)
    (row,) = standing.queue_rows()
    assert (row.running, row.pending, row.gpus, row.oldest_wait) == ("0/8", 1, "0/-", 69.0)
    gone = "no gate controller holds the lease (since 2026-01-01T00:00:05Z): nothing is being released"
    story = tell(seen.pods[0], (), standing, stalled=gone)
    assert story.headline == f"held by Sluicegate: it fits now, but {gone}"
    text = render(story)
    assert f"\n  {gone}\n" in text and "reason :" not in text and "running 0/8" in text
    fine = render(tell(seen.pods[0], (), standing))
    assert "\n  fits now: the controller releases it on its next cycle\n" in fine and "reason :" not in fine


def test_queues_as_json_give_numbers_and_null_where_there_is_no_limit() -> None:
    from cli.queues import as_json

    train = MakeQueue("train").max_running(8).obj()
    train["status"] = {"pending": 1, "display": {"running": "3/8", "gpus": "12/-"}}
    (row,) = status_rows([train], T0)
    shown = as_json(row)
    figures = (shown["running"], shown["maxRunning"], shown["gpusUsed"], shown["gpuQuota"], shown["pending"])
    assert figures == (3, 8, 12, None, 1)
