"""Who may read the recorder's records, as a caller sees it: the aggregated API the CLI reads
through the API server, the same records to a bearer token, discovery open to the aggregation
layer, and every refusal counted. (The front proxy's certificate is checked over real TLS in
test_callers.py; here the handshake's outcome is set on the connection.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import CollectorRegistry

from kube.authorizing import Access
from kube.resources import RECORDS
from process.callers import Handler
from recorder.application import build_app
from recorder.metrics import RecorderMetrics
from recorder.store import Store
from tests.unit.test_callers import NOBODY, PROXY, READER, Answers

HERE = "/apis/records.sluicegate.dev/v1alpha1/namespaces/sluicegate-system/records"
READ = Access("list", "records", "records.sluicegate.dev", namespace="sluicegate-system")
TOKEN, NOBODYS = {"Authorization": "Bearer t"}, {"Authorization": "Bearer n"}


def _handshake(name: str) -> web.Middleware:
    """What the TLS layer leaves on a connection whose client certificate it verified."""

    @web.middleware
    async def handshake(request: web.Request, handler: Handler) -> web.StreamResponse:
        transport: Any = request.transport
        transport._extra["peercert"] = {"subject": ((("commonName", name),),)}
        return await handler(request)

    return handshake


async def read(tmp_path: Path, path: str, headers: dict[str, str] | None = None, *,
               answers: Answers | None = None, peer: str | None = None,
               metrics: RecorderMetrics | None = None) -> tuple[int, Any]:
    answers = answers if answers is not None else Answers({"t": READER, "n": NOBODY}, allowed=(READER.user,))
    app = build_app(Store(tmp_path / "records.db"), metrics or RecorderMetrics(), answers,
                    front_proxy=PROXY if peer else None)
    if peer is not None:
        app.middlewares.insert(0, _handshake(peer))
    async with TestClient(TestServer(app)) as client:
        answer = await client.get(path, headers=headers or {})
        return answer.status, await answer.json()


def test_the_path_is_the_one_the_cli_reads() -> None:
    assert RECORDS.path(namespace="sluicegate-system") == HERE


async def test_discovery_is_open_to_the_aggregation_layer_and_offers_generic_clients_nothing(
    tmp_path: Path
) -> None:
    status, body = await read(tmp_path, "/apis/records.sluicegate.dev/v1alpha1")
    assert status == 200
    assert body == {"kind": "APIResourceList", "apiVersion": "v1",
                    "groupVersion": "records.sluicegate.dev/v1alpha1",
                    "resources": [{"name": "records", "singularName": "record", "namespaced": True,
                                   "kind": "Record", "verbs": []}]}


async def test_the_records_are_refused_to_a_caller_without_credentials_with_the_way_in(
    tmp_path: Path
) -> None:
    metrics = RecorderMetrics(CollectorRegistry())
    for path in (HERE, "/records"):
        status, body = await read(tmp_path, path, metrics=metrics)
        assert status == 401
        assert body["error"] == (
            "no credentials: this listener answers only callers Kubernetes authenticates; read the records "
            f"through the API server: GET {HERE} (sluicegate records export)")
    assert metrics.registry.get_sample_value("sluicegate_recorder_requests_total", {"result": "refused"}) == 2


async def test_a_token_reads_when_rbac_lets_it_list_records_in_the_recorders_namespace(
    tmp_path: Path
) -> None:
    answers = Answers({"t": READER, "n": NOBODY}, allowed=(READER.user,))
    status, body = await read(tmp_path, "/records", TOKEN, answers=answers)
    assert (status, body["kind"], body["items"]) == (200, "RecordList", [])
    status, body = await read(tmp_path, "/records", NOBODYS, answers=answers)
    assert status == 403 and body["error"] == (
        f'user "{NOBODY.user}" may not list records.records.sluicegate.dev in namespace sluicegate-system')
    assert {asked[1] for kind, asked in answers.asked if kind == "may"} == {READ}


async def test_through_the_api_server_the_user_it_names_is_the_reader(tmp_path: Path) -> None:
    answers = Answers(allowed=("alice",))
    alice = {"X-Remote-User": "alice", "X-Remote-Group": "platform"}
    status, body = await read(tmp_path, HERE, alice, answers=answers, peer="front-proxy-client")
    assert (status, body["kind"]) == (200, "RecordList")
    bob = {"X-Remote-User": "bob"}
    status, _ = await read(tmp_path, HERE, bob, answers=answers, peer="front-proxy-client")
    assert status == 403


async def test_another_namespace_has_no_records(tmp_path: Path) -> None:
    path = "/apis/records.sluicegate.dev/v1alpha1/namespaces/vision-research/records"
    status, body = await read(tmp_path, path, TOKEN, answers=Answers({"t": READER}, allowed=(READER.user,)))
    assert status == 404
    assert body["error"] == f"the records are served in namespace sluicegate-system only: {HERE}"
