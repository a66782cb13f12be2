"""The admission app, built in process by its factory: what the API server gets back for
good reviews, refusals, malformed bodies and oversized ones, and what /readyz and /metrics say."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from types import MappingProxyType
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import CollectorRegistry

from kube.connecting import Unreachable
from policy import keys, patching
from policy.catalog import Catalog
from policy.model import Namespace
from policy.priorities import PriorityClass, PriorityClasses
from policy.reviews import JOB, POD
from tests.admission_world import vision_catalog, vision_ml
from tests.builders import MakeJob, MakePod
from tests.webhook_builders import CONTROLLER, FixedSource, body, post, review
from webhook.application import build_app, operations_app
from webhook.denials import STARTING
from webhook.metrics import AdmissionMetrics
from webhook.settings import Settings

SETTINGS = Settings(controller=CONTROLLER, max_body_bytes=1024 * 1024)


def source(*, synced: bool = True) -> FixedSource:
    return FixedSource(vision_catalog(), {"vision-ml": vision_ml()
                                          .default_queue("vision-train").model()},
                       synced=synced)


@pytest.fixture
def metrics() -> AdmissionMetrics:
    return AdmissionMetrics(CollectorRegistry())


@pytest.fixture
async def client(metrics: AdmissionMetrics) -> AsyncIterator[TestClient[Any, Any]]:
    async with TestClient(TestServer(build_app(SETTINGS, source(), metrics))) as c:
        yield c



def patched(obj: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
    assert answer["patchType"] == "JSONPatch"
    result: dict[str, Any] = patching.apply(obj, json.loads(base64.b64decode(answer["patch"])))
    return result


def sample(metrics: AdmissionMetrics, name: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


async def test_a_gpu_pod_is_answered_with_the_patch_that_queues_and_gates_it(
    client: TestClient[Any, Any], metrics: AdmissionMetrics
) -> None:
    pod = MakePod.submitted().gpus(1).obj()
    doc = review(pod, kind=POD)
    answer = await post(client, "/mutate", doc)

    assert answer["uid"] == doc["request"]["uid"]
    assert answer["allowed"] is True
    out = patched(pod, answer)
    assert out["metadata"]["labels"][keys.QUEUE_LABEL] == "vision-train"
    assert out["metadata"]["labels"][keys.TEAM_LABEL] == "vision"
    assert out["spec"]["schedulingGates"] == [{"name": keys.GATE}]
    assert sample(metrics, "sluicegate_admission_requests_total",
                  operation="CREATE", kind="Pod", result="patched") == 1


async def test_a_refusal_carries_policys_message_and_is_counted_by_reason(
    client: TestClient[Any, Any], metrics: AdmissionMetrics
) -> None:
    answer = await post(client, "/mutate", review(MakePod.submitted().queue("prod-train").gpus(1).obj(),
                                                  kind=POD))

    assert answer["allowed"] is False
    assert answer["status"]["code"] == 403
    assert answer["status"]["message"].startswith('queue "prod-train" is not open to user alice')
    assert "patch" not in answer
    assert sample(metrics, "sluicegate_admission_denials_total", reason="QueueNotOpen") == 1
    assert sample(metrics, "sluicegate_admission_requests_total",
                  operation="CREATE", kind="Pod", result="denied") == 1


async def test_the_validating_webhook_passes_the_pod_admission_produced(client: TestClient[Any, Any]) -> None:
    pod = MakePod.submitted().gpus(1).obj()
    admitted = patched(pod, await post(client, "/mutate", review(pod, kind=POD)))

    answer = await post(client, "/validate", review(admitted, kind=POD))
    assert answer["allowed"] is True
    assert "patch" not in answer


async def test_the_validating_webhook_refuses_a_pod_a_later_webhook_ungated(
    client: TestClient[Any, Any], metrics: AdmissionMetrics
) -> None:
    pod = MakePod.submitted().gpus(1).obj()
    admitted = patched(pod, await post(client, "/mutate", review(pod, kind=POD)))
    del admitted["spec"]["schedulingGates"]

    answer = await post(client, "/validate", review(admitted, kind=POD))
    assert answer["allowed"] is False
    assert answer["status"]["message"] == (
        "vision-ml/train-0 was changed after Sluicegate admitted it (by a mutating webhook that ran "
        "later?): /spec/schedulingGates; Sluicegate's labels, annotations and the scheduling gate "
        "sluicegate.dev/dispatch must stay as admission set them"
    )
    assert sample(metrics, "sluicegate_admission_denials_total", reason="ChangedAfterAdmission") == 1


async def test_a_job_is_stamped_with_its_submitter(client: TestClient[Any, Any]) -> None:
    job = MakeJob(MakePod.submitted().gpus(1).template()).obj()
    out = patched(job, await post(client, "/mutate", review(job, kind=JOB, groups=("vision-devs",))))

    stamp = out["spec"]["template"]["metadata"]["annotations"][keys.SUBMITTER_ANNOTATION]
    assert json.loads(stamp) == {"user": "alice", "groups": ["vision-devs"]}


async def test_a_count_of_thousands_of_digits_is_denied_with_a_message_not_answered_500(
    client: TestClient[Any, Any]
) -> None:
    huge = "9" * 5000
    pod = MakePod.submitted().gpus(1).workflow("sweep").annotation(keys.WORKFLOW_MAX_RUNNING_ANNOTATION, huge)
    grouped = MakePod.submitted().gpus(1).annotation(keys.GROUP_SIZE_ANNOTATION, huge).group("ring")
    job = MakeJob(grouped.template()).obj()

    for doc in (review(pod.obj(), kind=POD), review(job, kind=JOB)):
        answer = await post(client, "/mutate", doc)
        assert answer["allowed"] is False
        assert answer["status"]["code"] == 403
        assert "must be a positive integer no larger than 2147483647" in answer["status"]["message"]
        assert len(answer["status"]["message"]) < 300


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        pytest.param(b"{not json", "malformed AdmissionReview: the body is not JSON", id="not JSON"),
        pytest.param(b"[1, 2]", "malformed AdmissionReview: the body is not a JSON object", id="a list"),
        pytest.param(
            body({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview", "request": {}}),
            "malformed AdmissionReview: expected apiVersion admission.k8s.io/v1 and kind AdmissionReview, "
            "got 'admission.k8s.io/v1beta1' and 'AdmissionReview'",
            id="an older version",
        ),
        pytest.param(
            body({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}),
            "malformed AdmissionReview: AdmissionReview.request is missing or not an object",
            id="no request",
        ),
        pytest.param(
            body({**review(None, kind=POD), "request": {**review(None, kind=POD)["request"], "uid": ""}}),
            "malformed AdmissionReview: AdmissionReview.request.uid is missing",
            id="no uid",
        ),
        pytest.param(
            body(review(None, kind=POD, operation="PATCH")),
            "malformed AdmissionReview: AdmissionRequest.operation: 'PATCH' is not a known operation",
            id="an unknown operation",
        ),
    ],
)
async def test_a_malformed_body_is_answered_400_with_what_is_wrong(
    client: TestClient[Any, Any], metrics: AdmissionMetrics, raw: bytes, message: str
) -> None:
    response = await client.post("/mutate", data=raw)
    assert response.status == 400
    assert (await response.json())["error"].startswith(message)
    assert sample(metrics, "sluicegate_admission_requests_total", operation="other", kind="other",
                  result="invalid") == 1


async def test_a_pod_nested_deeper_than_any_api_server_sends_is_answered_400_not_500(
    client: TestClient[Any, Any],
) -> None:
    pod = MakePod.submitted().gpus(1).obj()
    pod["spec"]["x"] = json.loads("[" * 900 + "]" * 900)
    response = await client.post("/mutate", data=body(review(pod, kind=POD)))
    assert response.status == 400
    assert (await response.json())["error"].endswith("nested too deeply")

    answer = await post(client, "/mutate", review(MakePod.submitted().gpus(1).obj(), kind=POD))
    assert answer["allowed"] is True


async def test_a_body_over_the_bound_is_answered_413_and_the_server_keeps_serving(
    client: TestClient[Any, Any],
) -> None:
    response = await client.post("/mutate", data=b"x" * (5 * 1024 * 1024))
    assert response.status == 413
    error = (await response.json())["error"]
    assert error == f"the request body is larger than {SETTINGS.max_body_bytes} bytes"

    answer = await post(client, "/mutate", review(MakePod.submitted().gpus(1).obj(), kind=POD))
    assert answer["allowed"] is True


async def test_readyz_waits_for_the_cache_and_metrics_count_what_was_answered(
    metrics: AdmissionMetrics,
) -> None:
    unsynced = source(synced=False)
    admission = TestClient(TestServer(build_app(SETTINGS, unsynced, metrics)))
    async with TestClient(TestServer(operations_app(unsynced, metrics.registry))) as ops, admission:
        assert (await ops.get("/healthz")).status == 200
        response = await ops.get("/readyz")
        assert response.status == 503
        assert "the cache has not listed" in await response.text()

        unsynced.synced = True
        assert (await ops.get("/readyz")).status == 200
        await post(admission, "/mutate", review(MakePod.submitted(name="web").obj(), kind=POD))
        text = await (await ops.get("/metrics")).text()
        counted = 'sluicegate_admission_requests_total{kind="Pod",operation="CREATE",result="allowed"} 1.0'
        assert counted in text
        assert 'sluicegate_admission_duration_seconds_count{webhook="mutate"} 1.0' in text


async def test_before_the_cache_has_listed_a_review_is_refused_as_starting_not_as_an_unknown_queue(
    metrics: AdmissionMetrics,
) -> None:
    # What a real cache holds before its first list: no queues, no teams, no namespaces.
    starting = FixedSource(Catalog.from_objects(), synced=False)
    async with TestClient(TestServer(build_app(SETTINGS, starting, metrics))) as admission:
        pod = MakePod.submitted().queue("vision-train").gpus(1).obj()
        answer = await post(admission, "/mutate", review(pod, kind=POD))

    assert answer["allowed"] is False
    assert answer["status"]["message"] == STARTING
    assert sample(metrics, "sluicegate_admission_denials_total", reason="Starting") == 1


class Classes:
    """The cluster's PriorityClasses, as the webhook's watch would hold them."""

    def classes(self) -> PriorityClasses:
        return MappingProxyType({
            "high": PriorityClass.parse({"metadata": {"name": "high"}, "value": 1000}),
            "queued-high": PriorityClass.parse({"metadata": {"name": "queued-high"}, "value": 1000,
                                                "preemptionPolicy": "Never"}),
        })


async def test_a_job_whose_pods_would_preempt_is_refused_from_the_classes_the_webhook_watches(
    metrics: AdmissionMetrics,
) -> None:
    app = build_app(SETTINGS, source(), metrics, classes=Classes())
    async with TestClient(TestServer(app)) as client:
        job = MakeJob(MakePod.submitted().gpus(1).spec(priorityClassName="high").template()).obj()
        answer = await post(client, "/mutate", review(job, kind=JOB))
        assert answer["allowed"] is False
        assert answer["status"]["message"].startswith(
            'PriorityClass "high" (value 1000) has preemptionPolicy PreemptLowerPriority: to place the '
            "pods of this Job, kube-scheduler would evict running pods of lower priority")
        assert answer["status"]["message"].endswith("(queued-high), or remove priorityClassName")
        assert sample(metrics, "sluicegate_admission_denials_total", reason="PriorityClass") == 1

        job = MakeJob(MakePod.submitted().gpus(1).spec(priorityClassName="queued-high").template()).obj()
        assert (await post(client, "/mutate", review(job, kind=JOB)))["allowed"] is True


class _Unreadable(FixedSource):
    """The API server cannot be asked about a namespace: every CREATE review fails."""

    async def current_namespace(self, name: str) -> Namespace:
        raise Unreachable(f"namespace {name}: connection refused")


async def test_junk_sent_to_the_port_counts_apart_from_reviews_so_the_error_ratio_cannot_exceed_one(
    metrics: AdmissionMetrics,
) -> None:
    """What the error alert divides: errors of reviews that parsed over those reviews, by
    webhook. Bodies that are not reviews (bad JSON, another kind, a wrong content type, too
    large) are counted as invalid and in neither, however many a caller sends."""
    failing = _Unreadable(vision_catalog(), {})
    async with TestClient(TestServer(build_app(SETTINGS, failing, metrics))) as c:
        for raw, content_type in [(b"{not json", "application/json"), (b"[]", "text/plain"),
                                  (b'{"kind": "Pod"}', "application/x-www-form-urlencoded"),
                                  (b"x" * (2 * 1024 * 1024), "application/json")] * 5:
            response = await c.post("/mutate", data=raw, headers={"Content-Type": content_type})
            assert response.status in (400, 413)
        response = await c.post("/mutate", data=body(review(MakePod.submitted().gpus(1).obj(), kind=POD)))
        assert response.status == 503

    assert sample(metrics, "sluicegate_admission_requests_total", operation="other", kind="other",
                  result="invalid") == 20
    assert sample(metrics, "sluicegate_admission_requests_total", operation="other", kind="other",
                  result="error") == 0
    assert sample(metrics, "sluicegate_admission_requests_total", operation="CREATE", kind="Pod",
                  result="error") == 1
    assert sample(metrics, "sluicegate_admission_errors_total", webhook="mutate") == 1
    assert sample(metrics, "sluicegate_admission_duration_seconds_count", webhook="mutate") == 1
    assert sample(metrics, "sluicegate_admission_errors_total", webhook="validate") == 0
