"""What ``sluicegate queues``, ``pods`` and ``explain`` answer, from objects as the API server
sends them (no cluster): the controller's decision, taken again by the CLI."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from cli.standings import (
    HELD,
    RELEASING,
    UNPLACEABLE_STATE,
    Expected,
    Observation,
    expected_start,
    expected_words,
    from_visibility,
    stand,
)
from cli.stories import FINISHED, UNMANAGED, render, tell
from kube.reading import kubeconfig_files
from policy import keys
from tests.builders import T0, MakeNamespace, MakeNode, MakePod, MakePolicy, MakeQueue, MakeTeam, timestamp

Obj = dict[str, Any]


def pod(name: str, queue: str, *, ns: str = "vision-research", team: str = "vision", at: float = 0.0,
        gpus: int = 1) -> MakePod:
    return MakePod(ns, name).queue(queue).team(team).gpus(gpus).created(at).admitted(at)


def seen(*pods: MakePod, queues: tuple[MakeQueue, ...] = (), teams: tuple[MakeTeam, ...] = (),
         policy: MakePolicy | None = None, now: float = 100.0) -> Observation:
    namespaces = [MakeNamespace("vision-research").team("vision").obj(),
                  MakeNamespace("nlp").team("nlp").obj(), MakeNamespace("elsewhere").obj()]
    return Observation(queues=[q.obj() for q in queues], teams=[t.obj() for t in teams],
                       policy=policy.obj() if policy else None, namespaces=namespaces,
                       pods=[p.obj() for p in pods], now=T0 + now)


def test_a_full_queue_holds_its_pods_in_submission_order_with_the_limit_and_its_numbers() -> None:
    train = MakeQueue("train").max_running(1)
    standing = stand(seen(pod("p0", "train").running("n1"), pod("p1", "train", at=1).gated(),
                          pod("p2", "train", at=2).gated(), queues=(train,)))
    lineup = standing.lineup()
    assert [(e.name, e.position, e.reason, e.state) for e in lineup] == [
        ("p1", 1, "QueueLimit", HELD), ("p2", 2, "QueueLimit", HELD)]
    assert lineup[0].message == "queue train: 1/1 running"
    (row,) = standing.queue_rows()
    assert (row.name, row.running, row.pending, row.gpus, row.paused) == ("train", "1/1", 2, "1/-", False)
    assert row.oldest_wait == 99.0


def test_higher_priority_queues_come_first_and_equal_ones_take_turns() -> None:
    queues = (MakeQueue("low").max_running(0), MakeQueue("a").priority(5).max_running(0),
              MakeQueue("b").priority(5).max_running(0))
    pods = [pod(f"{q}{i}", q, at=i).gated() for q in ("low", "a", "b") for i in range(2)]
    order = [e.name for e in stand(seen(*pods, queues=queues)).lineup()]
    assert order == ["a0", "b0", "a1", "b1", "low0", "low1"]


def test_work_that_fits_now_is_shown_as_about_to_be_released() -> None:
    standing = stand(seen(pod("p0", "train").gated(), queues=(MakeQueue("train"),)))
    (entry,) = standing.lineup()
    assert entry.state == RELEASING and entry.position is None and not entry.reason


def test_a_released_pod_counts_toward_the_team_admission_stamped_whatever_its_namespace_says_now() -> None:
    """As the controller counts it (policy.membership): a running pod of a namespace that left
    team vision still takes the queue's one slot and the team's."""
    stray = pod("x", "train", ns="elsewhere").running("n1")
    one = MakeQueue("train").max_running(1)
    standing = stand(seen(stray, pod("p1", "train", at=1).gated(), queues=(one,)))
    assert [(e.name, e.state, e.reason) for e in standing.lineup()] == [("p1", HELD, "QueueLimit")]
    assert standing.decision.usage.team("vision").running == 1
    (row,) = standing.queue_rows()
    assert (row.running, row.pending) == ("1/1", 1)


def test_a_gated_pod_whose_namespace_left_its_team_is_held_with_namespace_left_team() -> None:
    """Its namespace lost the team label (elsewhere) or names another team (nlp): held, with the
    reason and message the controller writes, and nowhere in a queue's count."""
    left = pod("gone", "train", ns="elsewhere", at=1).gated()
    moved = pod("moved", "train", ns="nlp", at=2).gated()  # admitted for vision; nlp is team nlp now
    standing = stand(seen(left, moved, pod("p0", "train", at=3).gated(), queues=(MakeQueue("train"),)))
    assert [(e.name, e.state, e.reason, e.position) for e in standing.lineup()] == [
        ("p0", RELEASING, "", None),
        ("gone", HELD, "NamespaceLeftTeam", None), ("moved", HELD, "NamespaceLeftTeam", None)]
    assert standing.lineup(namespace="elsewhere")[0].message.startswith(
        "namespace elsewhere is no longer opted in to team vision, which admitted this pod to queue train")


def test_explain_gives_a_pod_whose_namespace_left_its_team_no_place_in_its_queue() -> None:
    """It counts in no queue, so explain neither calls it next nor says nothing is ahead of it,
    while the queue's own head is elsewhere (as ``sluicegate pods`` lists it: no position)."""
    left = pod("gone", "train", ns="elsewhere", at=1).gated()
    standing = stand(seen(left, pod("p0", "train", at=0).running("n1"), pod("p1", "train", at=2).gated(),
                          queues=(MakeQueue("train").max_running(1),)))
    text = render(tell(left.obj(), [], standing))
    assert "reason NamespaceLeftTeam: namespace elsewhere is no longer opted in to team vision" in text
    assert "no place in its queue's order; running 1/1" in text
    assert "next in its queue" not in text and "nothing is ahead of it" not in text
    (row,) = standing.queue_rows()
    assert row.pending == 1


def test_a_pod_admission_never_marked_counts_for_nothing() -> None:
    """Queue and team labels without admission's stamp (written before the namespace opted in)."""
    unmarked = MakePod("vision-research", "x").queue("train").team("vision").gpus(1).running("n1")
    one = MakeQueue("train").max_running(1)
    standing = stand(seen(unmarked, pod("p1", "train", at=1).gated(), queues=(one,)))
    assert [e.state for e in standing.lineup()] == [RELEASING]


def test_a_released_pod_the_scheduler_cannot_place_is_listed_last_as_dispatched() -> None:
    words = "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."
    huge = pod("huge", "train", gpus=16).unschedulable(words)
    one = MakeQueue("train").max_running(1)
    standing = stand(seen(huge, pod("p1", "train", at=1).gated(), queues=(one,)))
    assert [(e.name, e.state, e.reason) for e in standing.lineup()] == [
        ("p1", HELD, "QueueLimit"), ("huge", UNPLACEABLE_STATE, "Dispatched")]
    assert standing.lineup()[1].message.startswith("dispatched, waiting for Kubernetes to place it: 0/4")
    assert standing.queue_rows()[0].unplaceable == 1


def test_filters_by_queue_and_namespace() -> None:
    queues = (MakeQueue("a").max_running(0), MakeQueue("b").max_running(0))
    standing = stand(seen(pod("a0", "a").gated(), pod("b0", "b").gated(),
                          pod("n0", "a", ns="nlp", team="nlp", at=1).gated(), queues=queues))
    assert [e.name for e in standing.lineup(queue="a")] == ["a0", "n0"]
    assert [e.name for e in standing.lineup(namespace="nlp")] == ["n0"]


def test_a_queue_pods_name_that_does_not_exist_is_listed_as_missing() -> None:
    standing = stand(seen(pod("p0", "gone").gated()))
    (row,) = standing.queue_rows()
    assert row.name == "gone" and row.priority is None
    assert standing.lineup()[0].message == 'queue "gone" does not exist'


def test_work_that_can_never_run_is_counted_per_queue() -> None:
    standing = stand(seen(pod("big", "train", gpus=9).gated(), queues=(MakeQueue("train").quota(gpus=8),)))
    assert standing.queue_rows()[0].never == 1
    assert "can never run under the current limits" in standing.lineup()[0].message


def _submitted(p: MakePod, user: str = "alice") -> MakePod:
    return (p.annotation(keys.SUBMITTER_ANNOTATION, f'{{"user":"{user}","groups":["vision-devs"]}}')
            .annotation(keys.APPLIED_PRESETS_ANNOTATION, "data-lake,single-gpu"))


def test_the_story_of_a_held_pod_names_the_limit_its_position_and_what_is_ahead() -> None:
    team = MakeTeam("vision").max_running(1)
    held = _submitted(pod("p2", "train", at=2).gated())
    standing = stand(seen(pod("p0", "train").running("n1"), pod("p1", "train", at=1).gated(), held,
                          queues=(MakeQueue("train"),), teams=(team,)))
    story = tell(held.obj(), [], standing)
    assert story.state == HELD
    assert story.headline == "held by Sluicegate: TeamLimit: team vision: 1/1 running"
    assert story.hold is not None
    assert (story.hold.position, story.hold.waiting_in_queue) == (2, 2)
    assert story.hold.ahead == ("vision-research/p1 (TeamLimit)",)
    assert story.hold.running == ("vision-research/p0",)
    text = render(story)
    assert "alice (groups: vision-devs)" in text and "data-lake, single-gpu" in text
    assert "position 2 of 2 in its queue; running 1/-, GPUs 1/-, pending 2" in text
    assert "waiting for Kubernetes" not in text


def test_the_story_of_an_unplaceable_pod_gives_the_schedulers_words_and_no_reason_of_sluicegate() -> None:
    words = "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."
    huge = _submitted(pod("huge", "train", gpus=16).unschedulable(words)).annotation(
        keys.DISPATCHED_AT_ANNOTATION, timestamp(T0 + 3))
    story = tell(huge.obj(), [], stand(seen(huge, queues=(MakeQueue("train"),))))
    assert story.state == UNPLACEABLE_STATE
    assert story.headline == f"dispatched, waiting for Kubernetes to place it: {words}"
    assert story.hold is None
    text = render(story)
    assert "released by queue train after waiting 3.0s" in text
    assert all(reason.value not in text for reason in keys.Reason)


def test_the_story_of_a_finished_pod_says_where_it_ran_and_how_it_ended() -> None:
    done = _submitted(pod("quick", "train").finished().node("n1")).annotation(
        keys.DISPATCHED_AT_ANNOTATION, timestamp(T0 + 1))
    obj = done.obj()
    obj["status"]["containerStatuses"] = [{"name": "main", "state": {"terminated": {
        "exitCode": 0, "reason": "Completed", "finishedAt": timestamp(T0 + 5)}}}]
    story = tell(obj, [], stand(seen(queues=(MakeQueue("train"),))))
    assert story.state == FINISHED
    assert story.headline.startswith("finished: Succeeded at ") and story.headline.endswith("ran on node n1")
    assert "container main ended: Completed, exit code 0" in render(story)


def test_without_the_cluster_wide_view_a_held_pod_still_tells_its_condition() -> None:
    held = pod("p1", "train").gated().obj()
    held["status"]["conditions"] = [{"type": keys.CONDITION, "status": "False", "reason": "QueueLimit",
                                     "message": "queue train: 1/1 running"}]
    story = tell(held, [], None, "pods is forbidden")
    assert story.headline == "held by Sluicegate: QueueLimit: queue train: 1/1 running"
    assert story.notes == ("position and what is ahead unknown: pods is forbidden",)


def test_a_pod_without_sluicegates_labels_is_unmanaged() -> None:
    assert tell(MakePod("default", "web").obj(), [], None).state == UNMANAGED


def test_the_kubeconfig_is_chosen_as_kubectl_chooses_it() -> None:
    assert kubeconfig_files("/a", {"KUBECONFIG": "/b:/c"}) == "/a"
    assert kubeconfig_files("", {"KUBECONFIG": "/b:/c"}) == "/b:/c"
    assert kubeconfig_files("", {}) == "~/.kube/config"


def test_the_cli_decides_with_the_nodes_it_read_as_the_controller_does() -> None:
    """A pod no node could hold waits with NoNodeFits, as the controller tells it; without the
    Nodes (a reader not allowed to list them) every pod is taken to fit, and it reads as
    about to be released."""
    big = seen(pod("big", "train", gpus=16).gated(), queues=(MakeQueue("train"),))
    nodes = [MakeNode("gpu-1").gpus(8).obj(), MakeNode("gpu-2").gpus(8).obj()]
    (entry,) = stand(replace(big, nodes=nodes)).lineup()
    assert (entry.reason, entry.state) == ("NoNodeFits", HELD)
    assert entry.message == "needs 16 nvidia.com/gpu on one node; the largest node of the cluster has 8"
    assert stand(replace(big, nodes=nodes)).queue_rows()[0].never == 1
    (unknown,) = stand(big).lineup()
    assert unknown.state == RELEASING


def test_a_pod_whose_release_the_api_server_refused_is_held_saying_so_and_the_one_behind_goes() -> None:
    """Only the controller saw the refusal; the CLI reads it from the pod's condition and
    decides as the controller does: the refused pod holds nothing, the next one goes."""
    words = ('the API server refused to release it: Pod "a" is invalid: metadata.annotations: '
             "Too long: may not be more than 262144 bytes")
    refused = pod("a", "train").gated().held("ReleaseRefused", words)
    behind = pod("b", "train", at=1).gated()
    lineup = stand(seen(refused, behind, queues=(MakeQueue("train").max_running(1),))).lineup()
    entries = {entry.name: entry for entry in lineup}
    assert (entries["a"].reason, entries["a"].state, entries["a"].message) == ("ReleaseRefused", HELD, words)
    assert entries["b"].state == RELEASING


def test_the_visibility_apis_places_and_estimates_go_on_the_pods_read_in_its_order() -> None:
    first = pod("a", "sweeps", gpus=2, at=1).gated()
    second = pod("b", "sweeps", gpus=1, at=2).gated()
    seen = Observation(namespaces=[MakeNamespace("vision-research").team("vision").obj()],
                       pods=[first.obj(), second.obj()], now=T0 + 60)
    items = [
        {"metadata": {"name": "b", "namespace": "vision-research"}, "queue": "sweeps", "position": 1,
         "workloadsAhead": 0, "reason": "QueueLimit", "message": "queue sweeps: 1/1 running",
         "expectedStart": {"p10Seconds": 540, "p50Seconds": 840, "p90Seconds": 1860}},
        {"metadata": {"name": "a", "namespace": "vision-research"}, "queue": "sweeps", "position": 2,
         "workloadsAhead": 1, "reason": "QueueLimit", "message": "queue sweeps: 1/1 running",
         "expectedStart": {"unknown": "nothing recorded yet: no run's length to go by"}},
        {"metadata": {"name": "gone", "namespace": "vision-research"}, "queue": "sweeps", "position": 3,
         "workloadsAhead": 2, "reason": "QueueLimit", "message": "queue sweeps: 1/1 running"},
    ]
    entries = from_visibility(items, seen)
    assert [(e.name, e.position, e.ahead, e.gpus, expected_start(e.expected)) for e in entries] == [
        ("b", 1, 0, 1, "~14m (9–31m)"), ("a", 2, 1, 2, "unknown")]
    assert entries[1].expected == Expected(unknown="nothing recorded yet: no run's length to go by")


def test_expected_starts_read_in_seconds_minutes_or_hours() -> None:
    shown = [expected_start(e) for e in (
        None, Expected(unknown="its queue is paused"), Expected(0, 0, 0), Expected(30, 45, 80),
        Expected(540, 840, 1860), Expected(2400, 3000, 7200), Expected(3600, 7200, None),
        Expected(None, 840, 1860))]
    assert shown == ["unknown", "unknown", "now", "~45s (30–80s)", "~14m (9–31m)", "~50m (40m–2h)",
                     "~2h (60m–>1d)", "~14m (14–31m)"]


def test_explain_says_about_when_or_why_nobody_can_say() -> None:
    assert expected_words(Expected(540, 840, 1860)) == "expected to start in about 14m (9–31m)"
    assert expected_words(Expected(0, 0, 0)) == "expected to start now"
    paused = Expected(unknown="its queue is paused")
    assert expected_words(paused) == "start time unknown: its queue is paused"
    assert expected_words(None) == ""
