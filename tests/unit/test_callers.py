"""Who may call a listener that serves data (``process.callers.guard``): the answers a caller
gets, and what the API server is asked, with a stand-in for the API server's reviews.

The TLS handshake is played by ``peer`` (the common name of a client certificate the server
verified) except in the last tests, which run a real TLS server with the front-proxy CA.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from certs.authority import Authority
from kube.authenticating import FrontProxy, Identity
from kube.authorizing import Access
from kube.connecting import Unreachable
from process.callers import IDENTITY, guard
from process.certificates import server_context

READ = Access("list", "records", "records.sluicegate.dev", namespace="sluicegate-system")
PROXY_CA = Authority.create("front-proxy-ca")
PROXY = FrontProxy(ca=PROXY_CA.cert_pem.decode(), allowed_names=("front-proxy-client",),
                   username_headers=("X-Remote-User",), uid_headers=("X-Remote-Uid",),
                   group_headers=("X-Remote-Group",), extra_prefixes=("X-Remote-Extra-",))
READER = Identity("system:serviceaccount:ops:exporter", groups=("system:serviceaccounts",))
NOBODY = Identity("system:serviceaccount:vision-research:default")


class Answers:
    """Stands in for the API server: knows some tokens, allows some users; records every question."""

    def __init__(self, tokens: dict[str, Identity] | None = None, allowed: tuple[str, ...] = (),
                 failing: bool = False) -> None:
        self.tokens = tokens or {}
        self.users = set(allowed)
        self.failing = failing
        self.asked: list[tuple[str, Any]] = []

    async def identity(self, token: str) -> Identity | None:
        self.asked.append(("who", token))
        if self.failing:
            raise Unreachable("POST /apis/authentication.k8s.io/v1/tokenreviews: connection refused")
        return self.tokens.get(token)

    async def allowed(self, identity: Identity, access: Access) -> bool:
        self.asked.append(("may", (identity, access)))
        return identity.user in self.users


def app(answers: Answers, peer: str | None = None) -> web.Application:
    async def served(request: web.Request) -> web.Response:
        who = request[IDENTITY]
        return web.json_response({"user": who.user, "groups": list(who.groups), "via": who.via,
                                  "extra": {k: list(v) for k, v in who.extra}})

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    needs = {"/data": READ}
    middleware = guard(answers, lambda r: needs.get(r.path), front_proxy=PROXY, open_paths={"/healthz"},
                       hint="read it through the API server", peer=lambda _: peer)
    application = web.Application(middlewares=[middleware])
    application.add_routes([web.get("/data", served), web.get("/whoami", served),
                            web.get("/healthz", healthz)])
    return application


async def call(application: web.Application, path: str = "/data",
               headers: dict[str, str] | None = None) -> tuple[int, Any, aiohttp.typedefs.LooseHeaders]:
    async with TestClient(TestServer(application)) as client:
        answer = await client.get(path, headers=headers or {})
        body = await answer.json() if answer.content_type == "application/json" else await answer.text()
        return answer.status, body, answer.headers


async def test_a_caller_without_credentials_is_refused_and_nothing_is_asked() -> None:
    answers = Answers({"t": READER}, allowed=(READER.user,))
    status, body, headers = await call(app(answers))
    assert status == 401 and headers["WWW-Authenticate"] == "Bearer"
    assert body == {"error": "no credentials: this listener answers only callers Kubernetes authenticates; "
                             "read it through the API server"}
    assert answers.asked == []


@pytest.mark.parametrize("authorization", ["Basic dXNlcjpwYXNz", "Bearer ", "bearer", "Token abc"])
async def test_what_is_not_a_bearer_token_counts_as_no_credentials(authorization: str) -> None:
    answers = Answers()
    status, body, _ = await call(app(answers), headers={"Authorization": authorization})
    assert status == 401 and body["error"].startswith("no credentials")
    assert answers.asked == []


async def test_a_token_the_api_server_does_not_know_is_refused_before_any_access_question() -> None:
    answers = Answers({"t": READER}, allowed=(READER.user,))
    status, body, _ = await call(app(answers), headers={"Authorization": "Bearer forged"})
    assert (status, body) == (401, {"error": "the API server does not accept this bearer token"})
    assert answers.asked == [("who", "forged")]


async def test_an_account_without_the_permission_is_forbidden_with_who_and_what() -> None:
    answers = Answers({"t": NOBODY}, allowed=(READER.user,))
    status, body, _ = await call(app(answers), headers={"Authorization": "Bearer t"})
    assert status == 403
    assert body == {"error": 'user "system:serviceaccount:vision-research:default" may not list '
                             "records.records.sluicegate.dev in namespace sluicegate-system"}
    assert answers.asked == [("who", "t"), ("may", (NOBODY, READ))]


async def test_an_allowed_account_is_served_as_itself() -> None:
    answers = Answers({"t": READER}, allowed=(READER.user,))
    status, body, _ = await call(app(answers), headers={"Authorization": "Bearer t"})
    assert (status, body["user"], body["via"]) == (200, READER.user, "token")


async def test_a_path_that_needs_no_permission_serves_any_authenticated_caller_and_no_one_else() -> None:
    answers = Answers({"t": NOBODY})
    assert (await call(app(answers), "/whoami", {"Authorization": "Bearer t"}))[0] == 200
    assert (await call(app(answers), "/whoami"))[0] == 401
    assert (await call(app(answers), "/nowhere"))[0] == 401  # an unknown path says nothing to strangers
    assert answers.asked == [("who", "t")]


async def test_probes_stay_open_and_ask_nothing() -> None:
    answers = Answers()
    assert (await call(app(answers), "/healthz"))[:2] == (200, "ok\n")
    assert answers.asked == []


async def test_when_the_api_server_cannot_be_asked_nothing_is_let_through() -> None:
    answers = Answers({"t": READER}, allowed=(READER.user,), failing=True)
    status, body, _ = await call(app(answers), headers={"Authorization": "Bearer t"})
    assert status == 503 and body["error"].startswith("cannot ask the API server who is calling: ")


PROXIED = {"X-Remote-User": "alice", "X-Remote-Group": "vision-devs", "X-Remote-Extra-Scopes": "a"}


async def test_the_front_proxy_names_the_user_and_access_is_asked_for_that_user() -> None:
    answers = Answers(allowed=("alice",))
    headers = [("X-Remote-User", "alice"), ("X-Remote-Group", "vision-devs"),
               ("X-Remote-Group", "system:authenticated"), ("X-Remote-Extra-Acme.com%2Fproject", "p1")]
    async with TestClient(TestServer(app(answers, peer="front-proxy-client"))) as client:
        answer = await client.get("/data", headers=headers)
        body = await answer.json()
    assert answer.status == 200
    assert body == {"user": "alice", "groups": ["vision-devs", "system:authenticated"], "via": "front proxy",
                    "extra": {"acme.com/project": ["p1"]}}
    asked = answers.asked[0][1][0]
    assert [q for q, _ in answers.asked] == ["may"]  # no TokenReview: the certificate vouched
    assert asked.user_info() == {"username": "alice", "groups": ["vision-devs", "system:authenticated"],
                                 "extra": {"acme.com/project": ["p1"]}}


async def test_a_user_the_front_proxy_names_may_still_be_refused() -> None:
    status, body, _ = await call(app(Answers(allowed=("bob",)), peer="front-proxy-client"), headers=PROXIED)
    assert (status, body) == (403, {"error": 'user "alice" may not list records.records.sluicegate.dev in '
                                             "namespace sluicegate-system"})


async def test_front_proxy_headers_from_anyone_else_are_ignored() -> None:
    answers = Answers(allowed=("alice",))
    status, body, _ = await call(app(answers), headers=PROXIED)
    assert status == 401 and body["error"].startswith("no credentials")
    assert answers.asked == []
    # With a token, the token's owner is the caller, whatever the headers claim.
    answers = Answers({"t": NOBODY}, allowed=("alice",))
    status, _, _ = await call(app(answers), headers={**PROXIED, "Authorization": "Bearer t"})
    assert status == 403 and answers.asked[-1] == ("may", (NOBODY, READ))


async def test_a_verified_certificate_with_another_name_is_not_the_front_proxy() -> None:
    answers = Answers(allowed=("alice",))
    status, _, _ = await call(app(answers, peer="some-other-client"), headers=PROXIED)
    assert status == 401 and answers.asked == []


async def test_the_front_proxy_must_name_a_user() -> None:
    status, body, _ = await call(app(Answers(), peer="front-proxy-client"), headers={"X-Remote-Group": "g"})
    assert (status, body) == (401, {"error": "the front proxy's request names no user"})


# --- through a real TLS handshake ----------------------------------------------------------------


@pytest.fixture
def tls(tmp_path: Path) -> Iterator[tuple[ssl.SSLContext, Path]]:
    serving = Authority.create("serving-ca")
    pair = serving.issue_serving("localhost", ("127.0.0.1",))
    cert, key = pair.write(tmp_path, "serving")
    (tmp_path / "serving-ca.crt").write_bytes(serving.cert_pem)
    yield server_context(cert, key, PROXY.ca), tmp_path


def client_context(
    directory: Path, client: Authority | None, name: str = "front-proxy-client"
) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(directory / "serving-ca.crt"))
    if client is not None:
        cert, key = client.issue_client(name).write(directory, f"client-{name}")
        context.load_cert_chain(cert, key)
    return context


async def serve_tls(application: web.Application, context: ssl.SSLContext) -> tuple[web.AppRunner, int]:
    runner = web.AppRunner(application)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    server = site._server
    assert isinstance(server, asyncio.Server)
    return runner, server.sockets[0].getsockname()[1]


async def test_over_tls_only_the_front_proxys_certificate_makes_its_headers_count(
    tls: tuple[ssl.SSLContext, Path]
) -> None:
    context, directory = tls
    answers = Answers(allowed=("alice",))
    middleware = guard(answers, lambda _: READ, front_proxy=PROXY)
    application = web.Application(middlewares=[middleware])

    async def served(request: web.Request) -> web.Response:
        return web.json_response({"user": request[IDENTITY].user})

    application.add_routes([web.get("/data", served)])
    runner, port = await serve_tls(application, context)
    url = f"https://127.0.0.1:{port}/data"
    try:
        async with aiohttp.ClientSession() as session:
            async with session.get(url, headers=PROXIED, ssl=client_context(directory, PROXY_CA)) as answer:
                assert (answer.status, await answer.json()) == (200, {"user": "alice"})
            async with session.get(url, headers=PROXIED, ssl=client_context(directory, None)) as answer:
                assert answer.status == 401
            renamed = client_context(directory, PROXY_CA, name="someone")
            async with session.get(url, headers=PROXIED, ssl=renamed) as answer:
                assert answer.status == 401
            stranger = client_context(directory, Authority.create("another-ca"))
            with pytest.raises(aiohttp.ClientError):  # a certificate the front-proxy CA did not sign
                async with session.get(url, headers=PROXIED, ssl=stranger):
                    pass
    finally:
        await runner.cleanup()
    assert [who.user for _, (who, _) in answers.asked] == ["alice"]
