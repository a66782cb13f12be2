"""Break glass through the admission app: a gate removed by hand is allowed only when the API
server says the user may ``release`` the pod's queue, and only then is it asked."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, cast

import pytest
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import CollectorRegistry

from kube.authorizing import AccessReviews, release_review
from kube.connecting import Connection
from policy import keys
from policy.reviews import POD
from tests.unit.test_webhook_app import SETTINGS, patched, post, source
from tests.webhook_builders import review
from webhook.application import build_app
from webhook.metrics import AdmissionMetrics


class Answers:
    """Says yes to the users it lists; records every question."""

    def __init__(self, *allowed: str) -> None:
        self.allowed = set(allowed)
        self.asked: list[tuple[dict[str, Any], str]] = []

    async def may_release(self, user_info: Mapping[str, Any], queue: str) -> bool:
        self.asked.append((dict(user_info), queue))
        return str(user_info.get("username")) in self.allowed


async def admitted_and_ungated(client: TestClient[Any, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    container = {"name": "main", "image": "x", "resources": {"limits": {keys.GPU_RESOURCE: "1"}}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "train-0", "namespace": "vision-ml"},
           "spec": {"containers": [container]}}
    admitted = patched(pod, await post(client, "/mutate", review(pod, kind=POD, groups=("vision-devs",))))
    assert admitted["spec"]["schedulingGates"] == [{"name": keys.GATE}]
    ungated = {**admitted, "spec": {k: v for k, v in admitted["spec"].items() if k != "schedulingGates"}}
    return admitted, ungated


@pytest.mark.parametrize(("user", "allowed"), [("oncall", True), ("mallory", False)])
async def test_removing_the_gate_by_hand_needs_release_on_the_queue_and_the_log_names_who(
    user: str, allowed: bool, caplog: pytest.LogCaptureFixture
) -> None:
    answers = Answers("oncall")
    app = build_app(SETTINGS, source(), AdmissionMetrics(CollectorRegistry()), answers)
    async with TestClient(TestServer(app)) as client:
        admitted, ungated = await admitted_and_ungated(client)
        with caplog.at_level(logging.INFO, logger="webhook.reviewing"):
            # A pod UPDATE reaches only the validating webhook.
            answer = await post(client, "/validate", review(ungated, kind=POD, operation="UPDATE", user=user,
                                                            groups=("sre",), old=admitted))
    assert answer["allowed"] is allowed
    assert answers.asked == [({"username": user, "groups": ["sre"]}, "vision-train")]
    released = [r.getMessage() for r in caplog.records if "released pod" in r.getMessage()]
    line = f"break glass: {user} released pod vision-ml/train-0 from queue vision-train by hand"
    assert released == ([line] if allowed else [])


async def test_no_one_is_asked_about_an_update_that_keeps_the_gate() -> None:
    answers = Answers("oncall")
    app = build_app(SETTINGS, source(), AdmissionMetrics(CollectorRegistry()), answers)
    async with TestClient(TestServer(app)) as client:
        admitted, _ = await admitted_and_ungated(client)
        relabelled = {**admitted, "metadata": {**admitted["metadata"],
                                               "labels": {**admitted["metadata"]["labels"], "x": "y"}}}
        answer = await post(client, "/mutate", review(relabelled, kind=POD, operation="UPDATE", old=admitted))
    assert answer["allowed"] is True
    assert answers.asked == []


def test_the_access_review_carries_the_whole_identity() -> None:
    info = {"username": "oncall", "uid": "u-1", "groups": ["sre"], "extra": {"scopes": ["a"]}}
    assert release_review(info, "prod-train") == {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "resourceAttributes": {"group": "sluicegate.dev", "resource": "queues", "verb": "release",
                                   "name": "prod-train"},
            "user": "oncall", "groups": ["sre"], "uid": "u-1", "extra": {"scopes": ["a"]},
        },
    }


class CountingServer:
    """Stands in for the connection's one call: answers allowed and counts requests."""

    def __init__(self) -> None:
        self.posts = 0

    async def request(self, method: str, path: str, *, body: Any = None) -> dict[str, Any]:
        self.posts += 1
        return {"status": {"allowed": True}}


async def test_answers_are_cached_briefly_per_identity_and_queue() -> None:
    server, now = CountingServer(), [0.0]
    reviews = AccessReviews(cast(Connection, server), seconds=10, clock=lambda: now[0])
    alice = {"username": "alice", "groups": ["a"]}
    assert await reviews.may_release(alice, "q")
    assert await reviews.may_release(alice, "q")
    assert server.posts == 1
    await reviews.may_release(alice, "other")
    await reviews.may_release({"username": "alice", "groups": ["b"]}, "q")
    assert server.posts == 3
    now[0] = 10.5
    await reviews.may_release(alice, "q")
    assert server.posts == 4
