"""Whatever arrives at the admission endpoints, the answer is 200 (a review answered) or 400
(a malformed one, with a message), never a server fault, and the server keeps serving.

The app runs for real: built by its factory, served over TLS on a loopback port."""

from __future__ import annotations

import http.client
import json
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from certs.issuing import issue
from policy.reviews import POD
from process.certificates import server_context
from tests.admission_world import vision_catalog, vision_ml
from tests.builders import MakePod
from tests.webhook_builders import CONTROLLER, FixedSource, ServedApp, review
from webhook.application import build_app
from webhook.settings import Settings


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServedApp, ssl.SSLContext]]:
    files = issue(Path(tmp_path_factory.mktemp("tls")), hosts=["127.0.0.1"])
    source = FixedSource(vision_catalog(), {"vision-ml": vision_ml().default_queue("vision-train").model()})
    app = build_app(Settings(controller=CONTROLLER, max_body_bytes=256 * 1024), source)
    client = ssl.create_default_context(cafile=str(files.ca_cert))
    with ServedApp(app, server_context(files.cert, files.key)) as server:
        yield server, client


def post(served: tuple[ServedApp, ssl.SSLContext], path: str, body: bytes) -> tuple[int, Any]:
    server, context = served
    connection = http.client.HTTPSConnection("127.0.0.1", server.port, context=context, timeout=30)
    try:
        connection.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)
names = st.sampled_from(["Pod", "Job", "CronJob", "Deployment", "", "pod"]) | st.text(max_size=12)
metadata = st.fixed_dictionaries(
    {},
    optional={
        "name": st.text(max_size=12) | json_values,
        "labels": st.dictionaries(st.sampled_from(["sluicegate.dev/queue", "sluicegate.dev/team", "a"]),
                                  st.text(max_size=12) | json_values, max_size=3) | json_values,
        "annotations": st.dictionaries(
            st.sampled_from(["sluicegate.dev/presets", "sluicegate.dev/submitter",
                             "sluicegate.dev/group-size", "kubernetes.io/config.mirror"]),
            st.text(max_size=20) | json_values, max_size=3,
        ) | json_values,
        "ownerReferences": json_values,
    },
)
objects = json_values | st.fixed_dictionaries(
    {"metadata": metadata}, optional={"spec": json_values | st.fixed_dictionaries({}, optional={
        "containers": json_values, "nodeName": json_values, "schedulingGates": json_values,
    })},
)
requests = st.fixed_dictionaries(
    {
        "uid": st.text(max_size=10) | json_values,
        "kind": st.fixed_dictionaries({}, optional={
            "group": st.sampled_from(["", "batch", "apps"]) | json_values,
            "version": st.sampled_from(["v1", "v2"]) | json_values,
            "kind": names | json_values,
        }) | json_values,
        "operation": st.sampled_from(["CREATE", "UPDATE", "DELETE", "CONNECT", "PATCH"]) | json_values,
    },
    optional={
        "namespace": st.sampled_from(["vision-ml", "other", ""]) | json_values,
        "subResource": st.sampled_from(["", "status"]) | json_values,
        "userInfo": st.fixed_dictionaries({}, optional={
            "username": st.sampled_from(["alice", "system:serviceaccount:kube-system:job-controller"])
            | json_values,
            "groups": st.lists(st.text(max_size=8), max_size=3) | json_values,
        }) | json_values,
        "object": objects,
        "oldObject": objects,
        "dryRun": json_values,
    },
)
reviews = st.fixed_dictionaries({
    "apiVersion": st.sampled_from(["admission.k8s.io/v1", "admission.k8s.io/v1beta1"]) | st.text(max_size=10),
    "kind": st.sampled_from(["AdmissionReview", "AdmissionReviewList"]) | st.text(max_size=10),
    "request": requests | json_values,
})
bodies = (
    st.binary(max_size=300)
    | json_values.map(lambda v: json.dumps(v).encode())
    | reviews.map(lambda v: json.dumps(v).encode())
)


# Envelopes the server accepts, around requests whose contents are anything: these reach policy.
enveloped = st.fixed_dictionaries({
    "uid": st.text(min_size=1, max_size=10),
    "kind": st.fixed_dictionaries({
        "group": st.sampled_from(["", "batch"]),
        "version": st.just("v1"),
        "kind": st.sampled_from(["Pod", "Job", "CronJob", "Deployment"]),
    }),
    "operation": st.sampled_from(["CREATE", "UPDATE", "DELETE", "CONNECT"]),
    "namespace": st.sampled_from(["vision-ml", "other"]),
    "userInfo": st.fixed_dictionaries({
        "username": st.sampled_from(["alice", "system:serviceaccount:kube-system:job-controller",
                                     CONTROLLER]),
        "groups": st.lists(st.sampled_from(["vision-devs", "sre"]), max_size=2),
    }),
}, optional={"object": objects, "oldObject": objects}).map(
    lambda request: {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
)


def check(served: tuple[ServedApp, ssl.SSLContext], body: bytes, path: str) -> None:
    status, answer = post(served, path, body)
    assert status in (200, 400), answer
    event(f"answered {status}")
    if status == 400:
        assert answer["error"].startswith("malformed AdmissionReview: ")
    else:
        sent = json.loads(body)["request"]
        assert answer["response"]["uid"] == sent["uid"]
        assert isinstance(answer["response"]["allowed"], bool)


@settings(max_examples=300)
@given(body=bodies, path=st.sampled_from(["/mutate", "/validate"]))
def test_any_body_is_answered_200_or_400_never_a_fault(
    served: tuple[ServedApp, ssl.SSLContext], body: bytes, path: str
) -> None:
    check(served, body, path)


@settings(max_examples=300)
@given(doc=enveloped, path=st.sampled_from(["/mutate", "/validate"]))
def test_any_object_in_a_good_envelope_is_answered_200_or_400_never_a_fault(
    served: tuple[ServedApp, ssl.SSLContext], doc: dict[str, Any], path: str
) -> None:
    check(served, json.dumps(doc).encode(), path)


def test_after_everything_a_good_review_is_still_answered(served: tuple[ServedApp, ssl.SSLContext]) -> None:
    post(served, "/mutate", b"\xff" * 1000)
    status, too_big = post(served, "/mutate", b"x" * (5 * 1024 * 1024))
    assert (status, too_big["error"]) == (413, "the request body is larger than 262144 bytes")
    doc = review(MakePod.submitted().gpus(1).obj(), kind=POD)
    status, answer = post(served, "/mutate", json.dumps(doc).encode())
    assert status == 200
    assert answer["response"]["allowed"] is True
    assert answer["response"]["patchType"] == "JSONPatch"
