"""An API server in memory, for testing the gate controller's cycle without a cluster.

It answers the few requests the controller makes: JSON patches of pods (the ``test`` operation
included, through policy's own patch applier), strategic-merge patches of a pod's status
conditions, event creations, status applies and GETs of pods. Failures are scripted per
request (``fail``). ``PodCache`` plays the reflector: it shows pods as the fake server holds
them only when ``sync()`` is called, so a test decides how far the watch lags.
"""

from __future__ import annotations

import asyncio
import copy
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from controller.managed import ManagedPod, managed_pod
from kube.connecting import ApiError, Unreachable
from kube.reflecting import Change
from kube.resources import Resource
from policy.patching import PatchError, apply

Obj = dict[str, Any]
_POD = re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)(/status)?$")
ANNOTATION_BYTES = 256 * 1024  # the API server's bound on a pod's annotations, keys and values


def _check_annotations(obj: Obj) -> None:
    """Refuse, as the API server does, a pod whose annotations are over its bound."""
    notes = obj.get("metadata", {}).get("annotations") or {}
    if sum(len(k.encode()) + len(v.encode()) for k, v in notes.items()) > ANNOTATION_BYTES:
        name = obj["metadata"]["name"]
        raise ApiError(422, "Invalid", f'Pod "{name}" is invalid: metadata.annotations: Too long: '
                                       f"may not be more than {ANNOTATION_BYTES} bytes")


@dataclass
class FakeApi:
    pods: dict[tuple[str, str], Obj] = field(default_factory=dict)
    events: list[Obj] = field(default_factory=list)
    statuses: dict[str, Obj] = field(default_factory=dict)
    failures: list[int] = field(default_factory=list)
    """Statuses to answer the next gate patches with, in order (0: no answer)."""
    lost: int = 0
    slow: float = 0.0
    """Seconds a gate patch, once applied, waits before it answers."""
    """How many of the next gate patches to apply and then answer as a lost connection."""
    patches: int = 0
    version: int = 100
    writes: Counter[tuple[str, str]] = field(default_factory=Counter)
    """Requests that write, by what they wrote (``gate``, ``status``, ``event``) and pod name."""

    def add(self, obj: Obj) -> None:
        obj = copy.deepcopy(obj)
        meta = obj["metadata"]
        self.version += 1
        meta["resourceVersion"] = str(self.version)
        self.pods[(meta["namespace"], meta["name"])] = obj

    def pod(self, namespace: str, name: str) -> Obj:
        return self.pods[(namespace, name)]

    def gated(self) -> set[str]:
        return {name for (_, name), obj in self.pods.items() if obj["spec"].get("schedulingGates")}

    def shown(self, resource: Resource, name: str) -> Obj:
        """A Queue's, Team's or the Policy's status as a watch would show it at once: every one
        the catalog names exists here ({} until written)."""
        return self.statuses.get(resource.path(name, subresource="status"), {})

    def condition(self, namespace: str, name: str) -> Obj | None:
        for c in self.pod(namespace, name).get("status", {}).get("conditions", []):
            if c["type"] == "sluicegate.dev/Dispatched":
                found: Obj = c
                return found
        return None

    async def get(self, path: str, query: Any = None) -> Obj:
        return await self.request("GET", path, query=query)

    async def request(self, method: str, path: str, *, query: Any = None, body: Any = None,
                      content_type: str = "application/json", timeout: float = 0) -> Obj:
        found = _POD.match(path)
        if path.startswith("/apis/events.k8s.io/"):
            self.writes["event", body["regarding"]["name"]] += 1
            self.events.append(body)
            return dict(body)
        if "/status" in path and not found:  # a Queue's, Team's or the Policy's: replaced whole
            self.statuses[path] = apply({"status": self.statuses.get(path, {})}, body)["status"]
            return {"status": self.statuses[path]}
        if not found:
            raise AssertionError(f"the fake API does not serve {method} {path}")
        key = (found.group(1), found.group(2))
        if key not in self.pods:
            raise ApiError(404, "NotFound", f"pods {key[1]} not found")
        obj = self.pods[key]
        if method == "GET":
            return copy.deepcopy(obj)
        self.writes["status" if found.group(3) else "gate", key[1]] += 1
        if found.group(3):  # pods/status: merge the conditions by type
            notes = body.get("metadata", {}).get("annotations", {})
            _check_annotations({"metadata": {"name": key[1], "annotations": {
                **obj["metadata"].get("annotations", {}), **notes}}})
            conditions = obj.setdefault("status", {}).setdefault("conditions", [])
            for new in body["status"]["conditions"]:
                old = next((c for c in conditions if c["type"] == new["type"]), None)
                if old is None:
                    conditions.append(dict(new))
                else:
                    old.update(new)
            obj["metadata"].setdefault("annotations", {}).update(notes)
            self.version += 1
            obj["metadata"]["resourceVersion"] = str(self.version)
            return copy.deepcopy(obj)
        self.patches += 1
        if self.failures:
            status = self.failures.pop(0)
            if status:
                raise ApiError(status, "Scripted", "a scripted failure")
            raise Unreachable("a scripted lost connection")
        try:
            patched = apply(obj, body)
        except PatchError as e:
            raise ApiError(422, "Invalid", str(e)) from None
        _check_annotations(patched)
        self.version += 1
        patched["metadata"]["resourceVersion"] = str(self.version)
        self.pods[key] = patched
        if self.slow:
            await asyncio.sleep(self.slow)
        if self.lost:
            self.lost -= 1
            raise Unreachable("a scripted lost answer")
        return copy.deepcopy(patched)


@dataclass
class PodCache:
    """What the pod reflector would hold: the fake server's pods as of the last ``sync``."""

    api: FakeApi
    store: dict[str, ManagedPod] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    resource_version: str = ""
    listeners: list[Callable[[Change[ManagedPod]], None]] = field(default_factory=list)
    """Told of each change a ``sync`` finds, as the reflector tells its listeners."""

    def sync(self) -> None:
        before, versions = dict(self.store), dict(self.versions)
        self.store.clear()
        self.versions.clear()
        for obj in self.api.pods.values():
            if obj.get("status", {}).get("phase") in ("Succeeded", "Failed"):
                continue
            uid = obj["metadata"]["uid"]
            self.store[uid] = managed_pod(obj)
            self.versions[uid] = obj["metadata"]["resourceVersion"]
        self.resource_version = str(self.api.version)
        changes = [Change("DELETED", uid, old.key, old, None) for uid, old in before.items()
                   if uid not in self.store]
        for uid, new in self.store.items():
            old = before.get(uid)
            if old is None:
                changes.append(Change("ADDED", uid, new.key, None, new))
            elif versions.get(uid) != self.versions[uid] or old != new:
                changes.append(Change("MODIFIED", uid, new.key, old, new))
        for change in changes:
            for listener in self.listeners:
                listener(change)

    def items(self) -> Iterator[tuple[str, ManagedPod]]:
        return iter(list(self.store.items()))

    def values(self) -> Iterator[ManagedPod]:
        return iter(list(self.store.values()))

    def get(self, uid: str) -> ManagedPod | None:
        return self.store.get(uid)

    def version(self, uid: str) -> str:
        return self.versions.get(uid, "")


@dataclass
class Leader:
    leading: bool = True
    identity: str = "test-replica"
