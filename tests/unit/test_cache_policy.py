"""The cache's catalog when the Policy breaks: the last valid Policy stays in force, and with none
known admission of managed pods is closed. The store is filled as a watch would fill it."""

from __future__ import annotations

from typing import Any, cast

from kube.cache import Cache
from kube.connecting import Connection
from policy import keys


def policy(version: str, spec: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    meta = {"name": keys.POLICY_NAME, "uid": "p", "resourceVersion": version}
    return {"apiVersion": "sluicegate.dev/v1alpha1", "kind": "Policy", "metadata": meta, "spec": spec}, meta


def put(cache: Cache, version: str, spec: dict[str, Any]) -> None:
    obj, meta = policy(version, spec)
    cache.policies._upsert("p", obj, meta, version)


def test_a_policy_that_breaks_leaves_the_last_valid_one_in_force() -> None:
    cache = Cache(cast(Connection, None))
    put(cache, "1", {"maxRunning": 7, "managedResources": ["nvidia.com/gpu", "amd.com/gpu"]})
    assert cache.catalog().policy.max_running == 7
    put(cache, "2", {"maxRunning": "many"})
    catalog = cache.catalog()
    assert catalog.closed is None
    assert catalog.policy.max_running == 7
    assert catalog.manages("amd.com/gpu")
    assert f"Policy/{keys.POLICY_NAME}" in catalog.invalid
    put(cache, "3", {"maxRunning": 3})
    assert cache.catalog().policy.max_running == 3
    assert dict(cache.catalog().invalid) == {}


def test_a_policy_broken_from_the_start_closes_admission_of_managed_work() -> None:
    cache = Cache(cast(Connection, None))
    put(cache, "1", {"maxRunning": "many", "managedResources": ["amd.com/gpu"]})
    catalog = cache.catalog()
    assert catalog.closed is not None and "maxRunning" in catalog.closed
    assert catalog.policy.max_running == 0
    assert catalog.policy.trusted_controllers == ()
    assert catalog.manages("amd.com/gpu") and catalog.manages("nvidia.com/gpu")
    # It stays closed until the Policy is fixed, however often the catalog is rebuilt.
    put(cache, "2", {"maxRunning": "still many"})
    assert cache.catalog().closed is not None
    put(cache, "3", {})
    assert cache.catalog().closed is None


def test_the_cache_shows_each_queues_status_as_the_watch_delivered_it() -> None:
    from kube.resources import POLICIES, QUEUES, TEAMS

    cache = Cache(cast(Connection, None))
    for uid, version, status in [("q1", "1", None), ("q2", "2", {"pending": 7, "conditions": []})]:
        meta = {"name": f"train-{uid}", "uid": uid, "resourceVersion": version}
        obj = {"metadata": meta, "spec": {}, **({"status": status} if status else {})}
        cache.queues._upsert(uid, obj, meta, version)
    assert cache.status(QUEUES, "train-q1") == {}  # no status written yet
    assert cache.status(QUEUES, "train-q2") == {"pending": 7, "conditions": []}  # whoever wrote it
    assert cache.status(QUEUES, "gone") is None
    assert cache.status(TEAMS, "train-q1") is None and cache.status(POLICIES, keys.POLICY_NAME) is None
