"""The cache's catalog when the Policy breaks: the last valid Policy stays in force, and with none
known admission of managed pods is closed. The store is filled as a watch would fill it."""

from __future__ import annotations

from typing import Any, cast

from kube.cache import Cache
from kube.connecting import Connection
from policy import keys


def policy(version: str, spec: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    meta = {"name": keys.POLICY_NAME, "uid": "p", "resourceVersion": version}
    return {"apiVersion": "sluicegate.dev/v1beta1", "kind": "Policy", "metadata": meta, "spec": spec}, meta


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


def test_a_status_write_neither_rebuilds_the_catalog_nor_wakes_dispatch() -> None:
    """The gate controller's own status writes (and anyone's) change no input of a decision: they
    must not cost a catalog rebuild and a dispatch cycle each."""
    from kube.resources import QUEUES

    cache = Cache(cast(Connection, None))
    woken: list[int] = []
    cache.on_change(lambda: woken.append(1))

    def queue(version: str, spec: dict[str, Any], status: dict[str, Any] | None) -> None:
        meta = {"name": "train", "uid": "q", "resourceVersion": version, "generation": 1}
        obj = {"metadata": meta, "spec": spec, **({"status": status} if status is not None else {})}
        cache.queues._upsert("q", obj, meta, version)

    queue("1", {"maxRunning": 2}, None)
    first = cache.catalog()
    woken.clear()
    queue("2", {"maxRunning": 2}, {"pending": 0, "running": 0})
    queue("3", {"maxRunning": 2}, {"pending": 0, "running": 99})
    assert cache.catalog() is first
    assert woken == []
    assert cache.status(QUEUES, "train") == {"pending": 0, "running": 99}  # the status is still seen
    queue("4", {"maxRunning": 5}, {"pending": 0, "running": 99})
    assert cache.catalog().queues["train"].max_running == 5
    assert woken == [1]


def test_a_status_write_on_a_broken_queue_changes_nothing_either() -> None:
    cache = Cache(cast(Connection, None))
    woken: list[int] = []
    cache.on_change(lambda: woken.append(1))
    for version, running in (("1", 0), ("2", 7)):
        meta = {"name": "bad", "uid": "b", "resourceVersion": version}
        obj = {"metadata": meta, "spec": {"maxRunning": "many"}, "status": {"running": running}}
        cache.queues._upsert("b", obj, meta, version)
        if version == "1":
            first = cache.catalog()
            assert "Queue/bad" in first.invalid
            woken.clear()
    assert cache.catalog() is first
    assert woken == []
