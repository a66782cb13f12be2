"""The webhook judges a Job's pod against who created the Job, and checks stamps on Jobs outside
opted-in namespaces. Jobs reach the webhook's store as its watch would put them there; a Job the
watch has not delivered is read from an API server held in memory."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import CollectorRegistry

from kube.connecting import ApiError, Connection
from kube.reflecting import Reflector
from kube.resources import JOBS
from policy import keys
from policy.reviews import JOB, POD
from tests.admission_world import JOB_CONTROLLER, vision_catalog, vision_ml, written_by_sluicegate
from tests.builders import MakeJob, MakePod
from tests.webhook_builders import CONTROLLER, FixedSource, post, review
from webhook.application import build_app
from webhook.metrics import AdmissionMetrics
from webhook.owners import JobCreators, JobStamp
from webhook.settings import Settings

SETTINGS = Settings(controller=CONTROLLER, max_body_bytes=1024 * 1024)
FORGED = (
    "annotation sluicegate.dev/submitter names user mallory, but the Job that owns this pod was created "
    "by user alice"
)


class Jobs:
    """An API server holding Jobs, answering GETs of one (404 when it has none by that name)."""

    def __init__(self) -> None:
        self.jobs: dict[str, dict[str, Any]] = {}
        self.reads = 0

    async def get(self, path: str, query: Any = None) -> dict[str, Any]:
        self.reads += 1
        name = path.rsplit("/", 1)[1]
        if name not in self.jobs:
            raise ApiError(404, "NotFound", f'jobs.batch "{name}" not found')
        return copy.deepcopy(self.jobs[name])


def stamped_job(name: str = "train", *, uid: str = "uid-train", by: str | None = "alice") -> dict[str, Any]:
    pod = MakePod.submitted().gpus(1)
    template = (pod.submitter(by, "vision-devs") if by is not None else pod).template()
    job = MakeJob(template, name=name).obj()
    job["metadata"].update(uid=uid, resourceVersion="7")
    return job


def job_pod(stamp: str | None) -> dict[str, Any]:
    """A GPU pod of Job "train" (uid-train) as the Job controller creates it."""
    pod = MakePod.submitted().gpus(1).owned_by(JOB)
    if stamp is not None:
        pod = pod.submitter(stamp, "vision-devs")
    return pod.obj()


@pytest.fixture
def api() -> Jobs:
    return Jobs()


@pytest.fixture
def watched(api: Jobs) -> Reflector[JobStamp]:
    return Reflector(cast(Connection, api), JOBS, JobStamp.of)


def deliver(reflector: Reflector[JobStamp], job: dict[str, Any]) -> None:
    meta = job["metadata"]
    reflector._upsert(meta["uid"], job, meta, meta["resourceVersion"])


@pytest.fixture
async def client(api: Jobs, watched: Reflector[JobStamp]) -> AsyncIterator[TestClient[Any, Any]]:
    source = FixedSource(vision_catalog(), {"vision-ml": vision_ml()
                                            .default_queue("vision-train").model()})
    owners = JobCreators(cast(Connection, api), watched)
    app = build_app(SETTINGS, source, AdmissionMetrics(CollectorRegistry()), owners=owners)
    async with TestClient(TestServer(app)) as c:
        yield c



def pod_review(pod: dict[str, Any]) -> dict[str, Any]:
    return review(pod, kind=POD, user=JOB_CONTROLLER, groups=("system:serviceaccounts",))


async def test_a_pod_stamped_with_someone_other_than_its_jobs_creator_is_refused(
    client: TestClient[Any, Any], watched: Reflector[JobStamp]
) -> None:
    deliver(watched, stamped_job())
    for path in ("/mutate", "/validate"):
        answer = await post(client, path, pod_review(job_pod("mallory")))
        assert not answer["allowed"]
        assert answer["status"]["message"] == FORGED


async def test_a_pod_stamped_with_its_jobs_creator_is_admitted_as_that_creator(
    client: TestClient[Any, Any], watched: Reflector[JobStamp], api: Jobs
) -> None:
    deliver(watched, stamped_job())
    answer = await post(client, "/mutate", pod_review(job_pod("alice")))
    assert answer["allowed"] and "patch" in answer
    assert api.reads == 0


async def test_a_job_the_watch_has_not_delivered_yet_is_read_from_the_api_server(
    client: TestClient[Any, Any], api: Jobs
) -> None:
    api.jobs["train"] = stamped_job()
    answer = await post(client, "/mutate", pod_review(job_pod("mallory")))
    assert answer["status"]["message"] == FORGED
    assert api.reads == 1


async def test_a_jobs_other_pods_in_the_same_burst_do_not_read_it_again(
    client: TestClient[Any, Any], api: Jobs
) -> None:
    api.jobs["train"] = stamped_job()
    for _ in range(5):
        answer = await post(client, "/mutate", pod_review(job_pod("alice")))
        assert answer["allowed"] and "patch" in answer
    assert api.reads == 1


async def test_a_job_recreated_under_the_same_name_is_not_the_pods_owner(
    client: TestClient[Any, Any], watched: Reflector[JobStamp], api: Jobs
) -> None:
    """The watch holds the new Job "train"; the pod belongs to the old one, which is gone."""
    deliver(watched, stamped_job(uid="uid-newer", by="pat"))
    answer = await post(client, "/mutate", pod_review(job_pod("alice")))
    assert answer["allowed"]
    assert api.reads == 1


async def test_a_job_without_a_stamp_leaves_its_pods_stamp_to_the_rules_of_policy(
    client: TestClient[Any, Any], watched: Reflector[JobStamp]
) -> None:
    deliver(watched, stamped_job(by=None))
    answer = await post(client, "/mutate", pod_review(job_pod("alice")))
    assert answer["allowed"]


async def test_only_pods_the_job_controller_creates_are_looked_up(
    client: TestClient[Any, Any], api: Jobs
) -> None:
    pod = job_pod(None)
    answer = await post(client, "/mutate", review(pod, kind=POD, user="alice", groups=("vision-devs",)))
    assert answer["allowed"]
    assert api.reads == 0


@pytest.mark.parametrize(
    ("stamp", "allowed"),
    [
        pytest.param(None, True, id="a Job without Sluicegate keys"),
        pytest.param("mallory", True, id="a Job stamped with its own creator"),
        pytest.param("alice", False, id="a Job stamped with someone else"),
    ],
)
async def test_a_jobs_stamp_is_checked_in_a_namespace_that_has_not_opted_in(
    client: TestClient[Any, Any], stamp: str | None, allowed: bool
) -> None:
    job = stamped_job(by=stamp)
    del job["metadata"]["uid"]
    job["metadata"]["namespace"] = "scratch"
    request = review(job, kind=JOB, user="mallory", groups=("vision-devs",), namespace="scratch")
    answer = await post(client, "/validate", request)
    assert answer["allowed"] is allowed
    assert "patch" not in answer
    if not allowed:
        assert answer["status"]["message"] == written_by_sluicegate("annotation", keys.SUBMITTER_ANNOTATION)
