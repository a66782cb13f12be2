"""Who created the Job that owns a pod: what admission passes to policy as ``owner_creator``.

The creator of a Job is *known* when the Job (found by the pod's controller ownerReference, uid
included) carries a submitter stamp on its pod template. That stamp was written, or checked, by
Sluicegate's own admission of the Job: the validating Job and CronJob webhooks see every Job and
CronJob that carries or changes a stamp, in every namespace but the system ones and
Sluicegate's own, and refuse a stamp that does not name the account that created it (or, for a
CronJob's Job, the CronJob's stamp). So a pod is judged against the person the Job was admitted
for, not against whatever the pod itself carries.

Jobs are read from a watch of this process (one ``Reflector``, each Job reduced to its uid and
stamp). A pod's Job can be newer than the watch (the Job controller creates pods as soon as it
sees the Job), so a Job the watch does not hold yet is read from the API server, once: what was
read is kept (by uid, the last ``READ_KEPT`` Jobs) for the Job's other pods, which come in the
same burst, until the watch delivers it. A Job that no longer exists has no known creator. Only
pods created by the accounts that really create a Job's pods are looked up: a stamp on anyone
else's pod is never honoured anyway.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from kube.cache import Cache
from kube.connecting import JSON, ApiError, Connection
from kube.reflecting import Reflector
from kube.resources import JOBS
from policy import fields, keys
from policy.pods import Submitter
from policy.reviews import JOB, OWNERS, POD, Operation, Request

READ_KEPT: Final = 256
"""Jobs read from the API server that are kept for their other pods (the newest, by uid)."""


@dataclass(frozen=True, slots=True)
class JobStamp:
    """A Job as the webhook keeps it: its uid and the submitter stamped on its pod template."""

    uid: str
    submitter: Submitter | None

    @classmethod
    def of(cls, job: JSON) -> JobStamp:
        meta = fields.obj(job.get("metadata"))
        template = fields.at(job, OWNERS[JOB].templates[0])
        notes = fields.string_map(fields.obj(template.get("metadata")).get("annotations"))
        raw = notes.get(keys.SUBMITTER_ANNOTATION)
        return cls(str(meta.get("uid") or ""), Submitter.from_annotation(raw) if raw else None)


def job_owner(pod: Mapping[str, object]) -> tuple[str, str] | None:
    """The name and uid of the pod's controller owner when that is a batch/v1 Job."""
    refs = fields.obj(pod.get("metadata")).get("ownerReferences")
    for ref in refs if isinstance(refs, list) else ():
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            if ref.get("apiVersion") == JOB.api_version and ref.get("kind") == JOB.kind:
                name, uid = ref.get("name"), ref.get("uid")
                if isinstance(name, str) and name and isinstance(uid, str):
                    return name, uid
            return None
    return None


class JobCreators:
    """``creator(request, namespace)``: who created the pod's Job, when known (else None)."""

    def __init__(self, connection: Connection, jobs: Reflector[JobStamp]) -> None:
        self.connection = connection
        self.jobs = jobs
        self._read: OrderedDict[str, JobStamp] = OrderedDict()

    @classmethod
    def watching(cls, cache: Cache) -> JobCreators:
        """Add a quiet Job reflector to ``cache`` (its readiness waits for the Jobs' list too)."""
        return cls(cache.connection, cache.watch(JOBS, JobStamp.of, quiet=True))

    async def creator(self, request: Request, namespace: str) -> Submitter | None:
        """Raises ``KubeError`` when the Job had to be read and could not be."""
        if request.kind != POD or request.operation is not Operation.CREATE or not namespace:
            return None
        if request.user not in OWNERS[JOB].controllers:
            return None
        owner = job_owner(request.object)
        if owner is None:
            return None
        name, uid = owner
        stamp = self.jobs.named(name, namespace)
        if stamp is None or stamp.uid != uid:
            stamp = self._read.get(uid) or await self._fetch(name, namespace)
            if stamp is None:
                return None
        return stamp.submitter if stamp.uid == uid else None

    async def _fetch(self, name: str, namespace: str) -> JobStamp | None:
        """The Job as the API server has it now, kept for its other pods; None when it is gone
        (its pods are garbage, judged as their creator)."""
        try:
            stamp = JobStamp.of(await self.connection.get(JOBS.path(name, namespace=namespace)))
        except ApiError as e:
            if e.status == 404:
                return None
            raise
        self._read[stamp.uid] = stamp
        while len(self._read) > READ_KEPT:
            self._read.popitem(last=False)
        return stamp
