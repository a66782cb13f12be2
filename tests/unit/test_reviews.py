"""Reading an AdmissionReview's request into the values admission decides on."""

from __future__ import annotations

from typing import Any

import pytest

from policy.fields import InvalidObject
from policy.reviews import JOB, POD, AdmissionRequest, Kind, Operation, Request


def test_a_pod_create_is_read_with_its_user_and_groups() -> None:
    raw: AdmissionRequest = {
        "uid": "u1",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "operation": "CREATE",
        "userInfo": {"username": "alice", "groups": ["vision-devs", "system:authenticated"]},
        "object": {"metadata": {"name": "p"}},
        "oldObject": None,
    }
    request = Request.from_review(raw)
    assert request == Request(
        Operation.CREATE,
        POD,
        "alice",
        frozenset({"vision-devs", "system:authenticated"}),
        {"metadata": {"name": "p"}},
    )


def test_a_job_update_keeps_both_objects_and_the_subresource() -> None:
    raw: AdmissionRequest = {
        "kind": {"group": "batch", "version": "v1", "kind": "Job"},
        "subResource": "status",
        "operation": "UPDATE",
        "userInfo": {"username": "system:serviceaccount:kube-system:job-controller"},
        "object": {"spec": {}},
        "oldObject": {"spec": {"suspend": True}},
    }
    request = Request.from_review(raw)
    assert request.kind == JOB
    assert request.old_object == {"spec": {"suspend": True}}
    assert request.subresource == "status"
    assert request.groups == frozenset()


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        pytest.param(
            {"operation": "PATCH", "kind": {"group": "", "version": "v1", "kind": "Pod"}},
            "AdmissionRequest.operation: 'PATCH' is not a known operation",
            id="an unknown operation",
        ),
        pytest.param({"operation": "CREATE"}, "AdmissionRequest.kind is missing", id="no kind"),
        pytest.param(
            {
                "operation": "CREATE",
                "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "userInfo": {"groups": "admins"},
            },
            "AdmissionRequest.userInfo.groups: expected a list of strings, got 'admins'",
            id="groups that are not a list",
        ),
    ],
)
def test_a_malformed_request_is_an_invalid_object(raw: Any, message: str) -> None:
    with pytest.raises(InvalidObject) as caught:
        Request.from_review(raw)
    assert str(caught.value) == message


def test_kinds_print_as_owner_references_write_them() -> None:
    assert JOB.api_version == "batch/v1"
    assert POD.api_version == "v1"
    assert str(Kind("apps", "v1", "ReplicaSet")) == "apps/v1 ReplicaSet"
