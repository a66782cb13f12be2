"""The visibility API as its readers see it: each namespace's waiting pods with their place in
their queue and why they wait, a queue's line for admins, the expected start from the last
estimates, and who may read what (the front proxy's user, asked again of the API server)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

from aiohttp.test_utils import TestClient, TestServer

from controller.managed import Dispatched, ManagedPod
from controller.pending import NOT_ESTIMATED, RELEASING_MESSAGE, Board, board
from controller.visibility import Viewer, build_app, build_board
from kube.authenticating import Identity
from kube.authorizing import Access
from kube.resources import PENDING_PODS
from policy.catalog import Catalog
from policy.dispatching import dispatch
from policy.pods import Pod
from simulator.estimating import PAUSED, Estimate
from tests.builders import T0, MakePod, MakeQueue, snapshot
from tests.unit.test_callers import PROXY, Answers
from tests.unit.test_recorder_access import _handshake

ALICE = Identity("alice", groups=("vision-devs",))
SWEEPS = MakeQueue("sweeps").max_running(1)
HERE = PENDING_PODS.path(namespace="vision-research")


def trial(name: str, at: float, namespace: str = "vision-research") -> MakePod:
    return MakePod(namespace, name).queue("sweeps").team("vision").gpus(1).gated().created(at)


def lined_up() -> list[MakePod]:
    """One trial runs in sweeps (maxRunning 1); four wait, one of them in another namespace."""
    running = MakePod("vision-research", "trial-0").queue("sweeps").team("vision").gpus(1).running("n1")
    return [running, trial("trial-1", 1), trial("trial-2", 2), trial("other-3", 3, "nlp-research"),
            trial("trial-4", 4)]


def board_of(pods: list[MakePod], estimates: dict[str, Estimate] | None = None,
             made: float | None = None) -> Board:
    shot = snapshot(pods, [SWEEPS], now=T0 + 60)
    return board(shot, dispatch(shot), estimates=estimates, made=made)


def places(items: list[Any]) -> list[tuple[str, int | None, int, str]]:
    return [(i["metadata"]["name"], i.get("position"), i["workloadsAhead"], i["reason"]) for i in items]


def test_a_namespace_sees_its_own_waiting_pods_with_their_place_in_the_queue() -> None:
    shown = board_of(lined_up())
    assert places(shown.namespace("vision-research")) == [
        ("trial-1", 1, 0, "QueueLimit"), ("trial-2", 2, 1, "QueueLimit"), ("trial-4", 4, 3, "QueueLimit")]
    first = shown.namespace("vision-research")[0]
    assert first["message"] == "queue sweeps: 1/1 running"
    assert first["queue"] == "sweeps" and first["team"] == "vision"
    assert first["workload"] == "vision-research/trial-1"


def test_another_teams_pods_are_counted_ahead_but_not_shown() -> None:
    shown = board_of(lined_up())
    assert "other-3" not in [i["metadata"]["name"] for i in shown.namespace("vision-research")]
    assert places(shown.namespace("nlp-research")) == [("other-3", 3, 2, "QueueLimit")]


def test_an_admin_reads_the_whole_queue_in_its_order() -> None:
    assert [i["metadata"]["name"] for i in board_of(lined_up()).queue("sweeps")] == [
        "trial-1", "trial-2", "other-3", "trial-4"]


def test_the_expected_start_is_the_last_estimate_seen_from_now_and_unknown_says_why() -> None:
    # Estimated ten seconds before this board: times are epoch seconds, served as seconds from now.
    made = T0 + 50
    shown = board_of(lined_up(), {
        "vision-research/trial-2": Estimate("vision-research/trial-2", T0 + 600, T0 + 900.4, T0 + 1920),
        "vision-research/trial-4": Estimate("vision-research/trial-4", reason=PAUSED)}, made)
    trial_1, trial_2, trial_4 = shown.namespace("vision-research")
    assert trial_1["expectedStart"] == {"unknown": NOT_ESTIMATED}
    assert trial_2["expectedStart"] == {
        "p10Seconds": 540, "p50Seconds": 840, "p90Seconds": 1860, "p50Time": "2023-11-14T22:28:20Z",
        "p90Time": "2023-11-14T22:45:20Z", "estimatedAt": "2023-11-14T22:14:10Z"}
    assert trial_4["expectedStart"] == {"unknown": PAUSED, "estimatedAt": "2023-11-14T22:14:10Z"}


def test_a_start_already_past_is_now_and_one_beyond_the_horizon_has_no_p90() -> None:
    late = Estimate("vision-research/trial-1", T0 + 10, T0 + 20, None)
    item = board_of(lined_up(), {late.key: late}, T0).namespace("vision-research")[0]
    assert item["expectedStart"] == {"p10Seconds": 0, "p50Seconds": 0, "p50Time": "2023-11-14T22:13:40Z",
                                     "estimatedAt": "2023-11-14T22:13:20Z"}


def test_a_pod_that_fits_now_is_first_with_nothing_ahead_and_the_next_workload_counts_it() -> None:
    shown = board_of([trial("trial-1", 1), trial("trial-2", 2)])
    assert places(shown.namespace("vision-research")) == [
        ("trial-1", None, 0, ""), ("trial-2", 1, 1, "QueueLimit")]
    assert shown.namespace("vision-research")[0]["message"] == RELEASING_MESSAGE


def test_the_list_is_a_kubernetes_style_list_of_its_group() -> None:
    listing = board_of(lined_up()).listing([])
    assert listing["apiVersion"] == "visibility.sluicegate.dev/v1alpha1"
    assert listing["kind"] == "PendingPodList"
    assert listing["items"] == []


class Pods:
    """The controller's pod reflector, as the viewer reads it."""

    def __init__(self, pods: list[MakePod]) -> None:
        self.pods = {p.model().uid or p.model().key: ManagedPod(p.model()) for p in pods}

    @property
    def resource_version(self) -> str:
        return "1"

    def items(self) -> Iterator[tuple[str, ManagedPod]]:
        return iter(self.pods.items())

    def values(self) -> Iterator[ManagedPod]:
        return iter(self.pods.values())

    def get(self, uid: str) -> ManagedPod | None:
        return self.pods.get(uid)

    def version(self, uid: str) -> str:
        return "1"


def catalog() -> Catalog:
    return Catalog(queues={"sweeps": SWEEPS.model()})


def viewer(pods: list[MakePod], clock: list[float]) -> Viewer:
    return Viewer(Pods(pods), catalog, lambda ns: "vision",
                  seconds=2.0, clock=lambda: clock[0], wall=lambda: T0 + 60)


def test_the_board_from_the_cache_is_the_decision_on_the_pods_that_count() -> None:
    pods = lined_up()
    made = build_board([ManagedPod(p.model()) for p in pods], catalog(),
                       {"vision-research": "vision", "nlp-research": "vision"}, T0 + 60, None,
                       None, 1)[0]
    assert places(made.namespace("vision-research")) == places(board_of(pods).namespace("vision-research"))


def test_a_pod_whose_release_the_api_server_refused_says_so_as_its_condition_does() -> None:
    refused = "the API server refused to release it: metadata.annotations: Too long"
    pods = [ManagedPod(p.model()) for p in lined_up()]
    pods[1] = dataclasses.replace(pods[1], gates=("sluicegate.dev/gate",),
                                  condition=Dispatched("False", "ReleaseRefused", refused))
    made = build_board(pods, catalog(), {"vision-research": "vision", "nlp-research": "vision"},
                       T0 + 60, None, None, 1)[0]
    shown = {i["metadata"]["name"]: i for i in made.namespace("vision-research")}
    assert (shown["trial-1"]["reason"], shown["trial-1"]["message"]) == ("ReleaseRefused", refused)


def test_a_pod_of_a_namespace_that_left_its_team_is_shown_without_a_place() -> None:
    made = build_board([ManagedPod(trial("trial-1", 1).model())], catalog(), {"vision-research": None},
                       T0 + 60, None, None, 1)[0]
    assert places(made.namespace("vision-research")) == [("trial-1", None, 0, "NamespaceLeftTeam")]


async def test_reads_rebuild_the_board_at_most_once_per_period() -> None:
    clock = [100.0]
    seeing = viewer(lined_up(), clock)
    first = await seeing.board()
    assert await seeing.board() is first
    clock[0] += 1.9
    assert await seeing.board() is first
    clock[0] += 0.2
    second = await seeing.board()
    assert second is not first and second.version == 2 and seeing.builds == 2


async def read(path: str, answers: Answers, peer: str | None = "front-proxy-client",
               headers: dict[str, str] | None = None) -> tuple[int, Any]:
    app = build_app(viewer(lined_up(), [0.0]), answers, front_proxy=PROXY)
    if peer is not None:
        app.middlewares.insert(0, _handshake(peer))
    async with TestClient(TestServer(app)) as client:
        answer = await client.get(path, headers=headers or {})
        return answer.status, await answer.json()


AS_ALICE = {"X-Remote-User": "alice", "X-Remote-Group": "vision-devs"}


async def test_through_the_api_server_alice_lists_her_namespaces_waiting_pods() -> None:
    answers = Answers(allowed=("alice",))
    status, body = await read(HERE, answers, headers=AS_ALICE)
    assert status == 200, body
    assert [(i["metadata"]["name"], i["position"]) for i in body["items"]] == [
        ("trial-1", 1), ("trial-2", 2), ("trial-4", 4)]
    (who, access), = [q for kind, q in answers.asked if kind == "may"]
    assert who.user == "alice" and who.groups == ("vision-devs",)
    assert access == Access("list", "pendingpods", "visibility.sluicegate.dev", namespace="vision-research")


async def test_one_pending_pod_and_a_pod_that_is_not_waiting() -> None:
    answers = Answers(allowed=("alice",))
    status, body = await read(f"{HERE}/trial-2", answers, headers=AS_ALICE)
    assert status == 200 and body["position"] == 2 and body["kind"] == "PendingPod"
    status, body = await read(f"{HERE}/trial-0", answers, headers=AS_ALICE)
    assert status == 404
    assert body == {"error": "pod vision-research/trial-0 is not waiting for Sluicegate"}


async def test_a_caller_rbac_refuses_is_told_what_they_may_not_do() -> None:
    status, body = await read(PENDING_PODS.path(namespace="nlp-research"), Answers(), headers=AS_ALICE)
    assert status == 403
    assert body == {"error": 'user "alice" may not list pendingpods.visibility.sluicegate.dev in namespace '
                             'nlp-research'}


async def test_a_queues_line_needs_get_on_that_queues_pendingpods() -> None:
    answers = Answers(allowed=("admin",))
    path = "/apis/visibility.sluicegate.dev/v1alpha1/queues/sweeps/pendingpods"
    status, body = await read(path, answers, headers={"X-Remote-User": "admin"})
    assert status == 200
    assert [i["metadata"]["namespace"] for i in body["items"]] == [
        "vision-research", "vision-research", "nlp-research", "vision-research"]
    (_, access), = [q for kind, q in answers.asked if kind == "may"]
    assert access == Access("get", "queues", "visibility.sluicegate.dev", name="sweeps",
                            subresource="pendingpods")
    assert str(access) == "get queues/pendingpods.visibility.sluicegate.dev/sweeps"


async def test_headers_from_anyone_but_the_front_proxy_count_for_nothing() -> None:
    status, body = await read(HERE, Answers(allowed=("alice",)), peer="not-the-proxy", headers=AS_ALICE)
    assert status == 401
    assert body["error"].startswith("no credentials: this listener answers only callers Kubernetes")


async def test_discovery_is_open_and_offers_get_and_list_only() -> None:
    status, body = await read("/apis/visibility.sluicegate.dev/v1alpha1", Answers(), peer=None)
    assert status == 200
    assert {r["name"]: r["verbs"] for r in body["resources"]} == {
        "pendingpods": ["get", "list"], "queues": [], "queues/pendingpods": ["get"]}


def test_a_pod_is_keyed_as_the_controller_keys_it() -> None:
    pod: Pod = trial("trial-1", 1).model()
    assert pod.key == "vision-research/trial-1"
