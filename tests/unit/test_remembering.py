"""What the API server is asked when callers arrive: TokenReviews and SubjectAccessReviews
remembered for seconds, shared while in flight, bounded in number, never remembered when they
fail; and the front proxy read from what the API server publishes."""

from __future__ import annotations

import asyncio
import json
from typing import Any, cast

import pytest

from kube.authenticating import FrontProxy, Identity, TokenReviews, front_proxy_of
from kube.authorizing import Access, AccessReviews
from kube.connecting import Connection, Unreachable
from kube.remembering import Remembered


class ApiServer:
    """Stands in for the connection's one call: knows one token, allows one user, counts reviews."""

    def __init__(self) -> None:
        self.reviews: list[dict[str, Any]] = []
        self.failing = False
        self.slow: asyncio.Event | None = None

    async def request(self, method: str, path: str, *, body: Any = None) -> dict[str, Any]:
        assert method == "POST"
        self.reviews.append(body)
        if self.slow is not None:
            await self.slow.wait()
        if self.failing:
            raise Unreachable(f"POST {path}: connection refused")
        if body["kind"] == "TokenReview":
            if body["spec"]["token"] == "good":
                return {"status": {"authenticated": True, "user": {
                    "username": "system:serviceaccount:ops:exporter", "uid": "u1",
                    "groups": ["system:serviceaccounts", "system:authenticated"],
                    "extra": {"authentication.kubernetes.io/pod-name": ["exporter-0"]}}}}
            return {"status": {"authenticated": False, "error": "invalid bearer token"}}
        return {"status": {"allowed": body["spec"]["user"] == "system:serviceaccount:ops:exporter"}}


def tokens(server: ApiServer, now: list[float]) -> TokenReviews:
    return TokenReviews(cast(Connection, server), clock=lambda: now[0])


async def test_a_token_is_reviewed_once_in_ten_seconds_whatever_the_answer() -> None:
    server, now = ApiServer(), [0.0]
    reviews = tokens(server, now)
    who = await reviews.identity("good")
    assert who == Identity("system:serviceaccount:ops:exporter", uid="u1",
                           groups=("system:serviceaccounts", "system:authenticated"),
                           extra=(("authentication.kubernetes.io/pod-name", ("exporter-0",)),))
    assert await reviews.identity("good") == who
    assert await reviews.identity("bad") is None
    assert await reviews.identity("bad") is None
    assert len(server.reviews) == 2
    now[0] = 10.5
    await reviews.identity("good")
    assert len(server.reviews) == 3


async def test_callers_arriving_together_with_one_token_share_one_review() -> None:
    server = ApiServer()
    server.slow = asyncio.Event()
    reviews = tokens(server, [0.0])
    waiting = [asyncio.create_task(reviews.identity("good")) for _ in range(50)]
    await asyncio.sleep(0)
    server.slow.set()
    answers = await asyncio.gather(*waiting)
    assert len(server.reviews) == 1 and len({a.user for a in answers if a}) == 1


async def test_a_failed_review_reaches_every_waiter_and_is_not_remembered() -> None:
    server = ApiServer()
    server.failing, server.slow = True, asyncio.Event()
    reviews = tokens(server, [0.0])
    waiting = [asyncio.create_task(reviews.identity("good")) for _ in range(3)]
    await asyncio.sleep(0)
    server.slow.set()
    results = await asyncio.gather(*waiting, return_exceptions=True)
    assert all(isinstance(r, Unreachable) for r in results)
    server.failing, server.slow = False, None
    assert await reviews.identity("good") is not None
    assert len(server.reviews) == 2


async def test_the_memory_is_bounded_however_many_distinct_tokens_arrive() -> None:
    remembered: Remembered[str, int] = Remembered(most=100, clock=lambda: 0.0)

    async def answer() -> int:
        return 1

    for i in range(1000):
        await remembered.get(f"token-{i}", answer)
    assert len(remembered) == 100


async def test_at_most_a_few_distinct_questions_are_in_flight_at_once() -> None:
    remembered: Remembered[int, int] = Remembered(at_once=3)
    flying, most = 0, 0
    gate = asyncio.Event()

    async def ask() -> int:
        nonlocal flying, most
        flying += 1
        most = max(most, flying)
        await gate.wait()
        flying -= 1
        return 0

    waiting = [asyncio.create_task(remembered.get(i, ask)) for i in range(20)]
    await asyncio.sleep(0.01)
    gate.set()
    await asyncio.gather(*waiting)
    assert most == 3


async def test_access_is_asked_per_identity_and_question_and_remembered() -> None:
    server, now = ApiServer(), [0.0]
    reviews = AccessReviews(cast(Connection, server), seconds=10, clock=lambda: now[0])
    exporter = {"username": "system:serviceaccount:ops:exporter", "groups": ["system:serviceaccounts"]}
    read = Access("list", "records", "records.sluicegate.dev", namespace="sluicegate-system")
    assert await reviews.allowed(exporter, read)
    assert await reviews.allowed(exporter, read)
    assert not await reviews.allowed({"username": "alice"}, read)
    assert await reviews.allowed(exporter, Access("get", path="/metrics"))
    assert len(server.reviews) == 3
    assert server.reviews[0]["spec"] == {
        "resourceAttributes": {"group": "records.sluicegate.dev", "resource": "records", "verb": "list",
                               "namespace": "sluicegate-system"},
        "user": "system:serviceaccount:ops:exporter", "groups": ["system:serviceaccounts"]}
    assert server.reviews[2]["spec"]["nonResourceAttributes"] == {"path": "/metrics", "verb": "get"}


def configmap(**data: object) -> dict[str, Any]:
    return {"data": {k.replace("_", "-"): json.dumps(v) if isinstance(v, list) else v
                     for k, v in data.items()}}


def test_the_front_proxy_is_read_as_the_api_server_publishes_it() -> None:
    published = configmap(
        client_ca_file="-----BEGIN CERTIFICATE-----\ncluster\n-----END CERTIFICATE-----\n",
        requestheader_client_ca_file="-----BEGIN CERTIFICATE-----\nproxy\n-----END CERTIFICATE-----\n",
        requestheader_allowed_names=["front-proxy-client"],
        requestheader_username_headers=["X-Remote-User"],
        requestheader_group_headers=["X-Remote-Group"],
        requestheader_extra_headers_prefix=["X-Remote-Extra-"],
    )
    assert front_proxy_of(published) == FrontProxy(
        ca="-----BEGIN CERTIFICATE-----\nproxy\n-----END CERTIFICATE-----\n",
        allowed_names=("front-proxy-client",), username_headers=("X-Remote-User",), uid_headers=(),
        group_headers=("X-Remote-Group",), extra_prefixes=("X-Remote-Extra-",))


@pytest.mark.parametrize("data", [
    pytest.param({}, id="no data"),
    pytest.param({"data": {"client-ca-file": "-----BEGIN CERTIFICATE-----"}}, id="client CA only"),
    pytest.param({"data": {"requestheader-client-ca-file": ""}}, id="an empty CA"),
])
def test_an_api_server_without_a_front_proxy_publishes_none(data: dict[str, Any]) -> None:
    assert front_proxy_of(data) is None
