"""The health of the admin objects a process decides by, as Prometheus series.

Both processes that hold a catalog (the webhook and the gate controller) register these, so an
administrator is alerted when a Policy, Queue, Team or Preset on the API server cannot be used:

- ``sluicegate_policy_broken`` is 1 while the Policy ``cluster`` exists and does not parse. The
  last valid Policy stays in force meanwhile (it fails closed), but changes to it do not apply.
- ``sluicegate_policy_closed`` is 1 while no valid Policy is known at all (the process started
  while it was broken): admission refuses every pod it would manage and nothing is dispatched.
- ``sluicegate_policy_present`` is 1 while the Policy ``cluster`` exists (valid or not), 0 once it
  is deleted: Sluicegate then decides by ``Policy()``'s defaults, as documented (no global
  limits, only ``nvidia.com/gpu`` managed), which a GitOps prune would otherwise do silently.
- ``sluicegate_catalog_broken_objects{kind}`` counts the objects of each kind that do not parse
  (a broken Queue or Preset refuses the pods that use it). Every kind is always exported, at 0
  when none is broken, so an alert on it never reads an absent series.

The values are read from the catalog at scrape time; a catalog is rebuilt only after a change,
so a scrape costs next to nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from policy.catalog import POLICY_KEY, Catalog

KINDS = ("Queue", "Team", "Preset", "Policy")


class CatalogHealth(Collector):
    """A collector over ``catalog()``, the process's current catalog (``Cache.catalog``)."""

    def __init__(self, catalog: Callable[[], Catalog], policy_present: Callable[[], bool]) -> None:
        self.catalog = catalog
        self.policy_present = policy_present

    def describe(self) -> Iterator[Metric]:
        """The series' names without reading the catalog (registering must not build one)."""
        yield GaugeMetricFamily("sluicegate_policy_broken", "")
        yield GaugeMetricFamily("sluicegate_policy_closed", "")
        yield GaugeMetricFamily("sluicegate_policy_present", "")
        yield GaugeMetricFamily("sluicegate_catalog_broken_objects", "", labels=["kind"])

    def collect(self) -> Iterator[Metric]:
        catalog = self.catalog()
        broken = GaugeMetricFamily(
            "sluicegate_policy_broken",
            "1 while the Policy cluster does not parse (the last valid one stays in force), else 0",
        )
        broken.add_metric([], 1.0 if POLICY_KEY in catalog.invalid else 0.0)
        yield broken
        closed = GaugeMetricFamily(
            "sluicegate_policy_closed",
            "1 while no valid Policy is known: managed pods are refused and nothing is dispatched",
        )
        closed.add_metric([], 1.0 if catalog.closed is not None else 0.0)
        yield closed
        present = GaugeMetricFamily(
            "sluicegate_policy_present",
            "1 while the Policy cluster exists; 0: deleted, and the defaults of Policy() apply",
        )
        present.add_metric([], 1.0 if self.policy_present() else 0.0)
        yield present
        objects = GaugeMetricFamily(
            "sluicegate_catalog_broken_objects",
            "Queues, Teams, Presets and Policies that do not parse, by kind",
            labels=["kind"],
        )
        counts = dict.fromkeys(KINDS, 0)
        for key in catalog.invalid:
            kind = key.partition("/")[0]
            if kind in counts:
                counts[kind] += 1
        for kind, count in counts.items():
            objects.add_metric([kind], float(count))
        yield objects


def register(
    registry: CollectorRegistry, catalog: Callable[[], Catalog], policy_present: Callable[[], bool]
) -> CatalogHealth:
    """Export the catalog's health on ``registry``; ``policy_present`` says whether the Policy
    object exists (the cache's Policy reflector holds it)."""
    collector = CatalogHealth(catalog, policy_present)
    registry.register(collector)
    return collector
