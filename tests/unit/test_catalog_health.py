"""The series an administrator is alerted by when the Policy or another admin object breaks, as
a scrape of a process's registry shows them. The cache is filled as a watch would fill it."""

from __future__ import annotations

from typing import Any, cast

from prometheus_client import CollectorRegistry, generate_latest

from kube.cache import Cache
from kube.connecting import Connection
from kube.reflecting import Reflector
from policy import keys
from process import catalogs


def put(cache: Cache, kind: str, name: str, version: str, spec: dict[str, Any]) -> None:
    meta = {"name": name, "uid": f"{kind}-{name}", "resourceVersion": version}
    obj = {"apiVersion": keys.API_VERSION, "kind": kind, "metadata": meta, "spec": spec}
    reflectors: dict[str, Reflector[Any]] = {
        "Policy": cache.policies, "Queue": cache.queues, "Team": cache.teams, "Preset": cache.presets,
    }
    reflectors[kind]._upsert(meta["uid"], obj, meta, version)


def scrape(cache: Cache) -> tuple[CollectorRegistry, dict[str, float]]:
    registry = CollectorRegistry()
    catalogs.register(registry, cache.catalog, lambda: len(cache.policies) > 0)
    values = {
        "present": registry.get_sample_value("sluicegate_policy_present"),
        "broken": registry.get_sample_value("sluicegate_policy_broken"),
        "closed": registry.get_sample_value("sluicegate_policy_closed"),
        **{kind: registry.get_sample_value("sluicegate_catalog_broken_objects", {"kind": kind})
           for kind in catalogs.KINDS},
    }
    assert all(v is not None for v in values.values()), values
    return registry, cast(dict[str, float], values)


def test_a_healthy_catalog_exports_every_series_at_zero() -> None:
    cache = Cache(cast(Connection, None))
    put(cache, "Policy", keys.POLICY_NAME, "1", {"maxRunning": 4})
    _, values = scrape(cache)
    assert values == {"present": 1, "broken": 0, "closed": 0, "Queue": 0, "Team": 0, "Preset": 0, "Policy": 0}


def test_a_policy_that_breaks_is_reported_broken_while_the_last_valid_one_stays_in_force() -> None:
    cache = Cache(cast(Connection, None))
    put(cache, "Policy", keys.POLICY_NAME, "1", {"maxRunning": 4})
    registry, _ = scrape(cache)
    put(cache, "Policy", keys.POLICY_NAME, "2", {"maxRunning": -1})
    assert registry.get_sample_value("sluicegate_policy_broken") == 1
    assert registry.get_sample_value("sluicegate_policy_closed") == 0
    assert registry.get_sample_value("sluicegate_catalog_broken_objects", {"kind": "Policy"}) == 1
    assert cache.catalog().policy.max_running == 4
    put(cache, "Policy", keys.POLICY_NAME, "3", {"maxRunning": 2})
    assert registry.get_sample_value("sluicegate_policy_broken") == 0
    assert registry.get_sample_value("sluicegate_catalog_broken_objects", {"kind": "Policy"}) == 0


def test_a_policy_broken_from_the_start_is_reported_closed() -> None:
    cache = Cache(cast(Connection, None))
    put(cache, "Policy", keys.POLICY_NAME, "1", {"maxRunning": "many"})
    _, values = scrape(cache)
    assert (values["broken"], values["closed"]) == (1, 1)


def test_broken_queues_teams_and_presets_are_counted_by_kind() -> None:
    cache = Cache(cast(Connection, None))
    put(cache, "Queue", "a", "1", {"maxRunning": -1})
    put(cache, "Queue", "b", "1", {"quota": {"nvidia.com/gpu": "lots"}})
    put(cache, "Queue", "c", "1", {"maxRunning": 2})
    put(cache, "Team", "t", "1", {"members": {"users": "alice"}})
    registry, values = scrape(cache)
    assert {k: values[k] for k in catalogs.KINDS} == {"Queue": 2, "Team": 1, "Preset": 0, "Policy": 0}
    assert values["broken"] == 0
    text = generate_latest(registry).decode()
    assert 'sluicegate_catalog_broken_objects{kind="Queue"} 2.0' in text


def test_a_catalog_read_before_the_policy_is_listed_is_not_taken_for_the_last_valid_policy() -> None:
    """A scrape (or any read) before the Policy's list arrives sees defaults; a broken Policy
    listed next must close admission, not fall back to those defaults."""
    cache = Cache(cast(Connection, None))
    registry, values = scrape(cache)
    assert values["closed"] == 0
    put(cache, "Policy", keys.POLICY_NAME, "1", {"maxRunning": -1, "managedResources": ["amd.com/gpu"]})
    assert registry.get_sample_value("sluicegate_policy_closed") == 1
    assert cache.catalog().manages("amd.com/gpu")


def test_a_deleted_policy_is_reported_absent_while_its_defaults_apply() -> None:
    cache = Cache(cast(Connection, None))
    _, values = scrape(cache)
    assert values["present"] == 0
    assert (values["broken"], values["closed"]) == (0, 0)
    assert cache.catalog().policy.max_running is None  # Policy(): no global limit
