"""The gate controller's Prometheus metrics, in a registry of their own (one per process, and
one per test that builds a controller in process).

Queue and team series carry the object's name; both are admin-owned and few, so the number
of series stays small. Every existing Queue and Team has its series (zero when idle), so an
alert on them has data to read; the series of a deleted queue or team are removed.
``manifests/components/monitoring`` alerts on these names, and an e2e test checks every name a
rule uses against a real scrape.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

# A pod waits from well under a second (a free slot) to hours (a full queue), or days (a
# paused queue, a sweep): the top buckets keep such waits in the quantiles.
WAIT_BUCKETS: Final = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 1800, 3600, 7200, 14400,
                       28800, 86400, 172800, 604800)
# One cycle over a few thousand pods takes milliseconds; 100k pods take about a second.
CYCLE_BUCKETS: Final = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)
OPERATIONS: Final = ("ungate", "condition", "event", "status", "lease")


class _Family:
    """A labelled gauge whose series are set all at once; series not set again are removed."""

    def __init__(self, gauge: Gauge) -> None:
        self.gauge = gauge
        self.present: set[tuple[str, ...]] = set()

    def replace(self, values: Mapping[tuple[str, ...], float]) -> None:
        for labels, value in values.items():
            self.gauge.labels(*labels).set(value)
        for labels in self.present - values.keys():
            self.gauge.remove(*labels)
        self.present = set(values)


class ControllerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        r = self.registry = registry if registry is not None else CollectorRegistry()

        self.families: list[_Family] = []

        def gauge(name: str, doc: str, labels: Iterable[str]) -> _Family:
            family = _Family(Gauge(name, doc, list(labels), registry=r))
            self.families.append(family)
            return family

        self.loop_longest_block = Gauge(
            "sluicegate_event_loop_longest_block_seconds",
            "The longest the event loop was held since the process started: how late a probe that "
            "wakes every 100 ms woke (process.loops; a busy machine not running the process counts too)",
            registry=r)
        self.queue_pending = gauge("sluicegate_queue_pending_workloads",
                                   "Workloads held by the gate, by queue", ["queue"])
        self.queue_running = gauge("sluicegate_queue_running_workloads",
                                   "Workloads released and not finished, by queue", ["queue"])
        self.queue_usage = gauge("sluicegate_queue_usage",
                                 "Requests of the running workloads, by queue and resource (in units)",
                                 ["queue", "resource"])
        self.queue_oldest = gauge("sluicegate_queue_oldest_pending_age_seconds",
                                  "Age of the oldest pending workload, by queue (0 when none waits)",
                                  ["queue"])
        self.queue_waiting = gauge("sluicegate_queue_waiting_workloads",
                                   "Pending workloads by queue and the reason they wait", ["queue", "reason"])
        self.queue_oldest_waiting = gauge(
            "sluicegate_queue_oldest_waiting_age_seconds",
            "Age of the oldest pending workload, by queue and the reason it waits (gated pods whose "
            "namespace left its team included, as NamespaceLeftTeam, and those whose DRA claims "
            "changed, as ClaimsChanged); a series only while some "
            "workload waits for that reason", ["queue", "reason"])
        self.queue_impossible = gauge("sluicegate_impossible_workloads",
                                      "Pending workloads that can never run under what exists now "
                                      "(each asks for more than a quota allows by itself, or no node "
                                      "could hold one of its pods: NoNodeFits, or the API server "
                                      "refused its release: ReleaseRefused), by queue",
                                      ["queue"])
        self.impossible_causes = gauge(
            "sluicegate_impossible_workloads_by_cause",
            "Pending workloads that can never run under what exists now, by queue, team and reason "
            "(the quota each exceeds by itself: QueueQuota, TeamQuota, GlobalQuota; or NoNodeFits); "
            "a series only while such work waits", ["queue", "team", "reason"])
        self.team_pending = gauge("sluicegate_team_pending_workloads", "Pending workloads, by team", ["team"])
        self.team_running = gauge("sluicegate_team_running_workloads", "Running workloads, by team", ["team"])
        self.team_usage = gauge("sluicegate_team_usage",
                                "Requests of the running workloads, by team and resource (in units)",
                                ["team", "resource"])
        self.unplaceable = gauge("sluicegate_dispatched_unplaceable_pods",
                                 "Pods released by dispatch that kube-scheduler reports it cannot place, "
                                 "or that no scheduler has looked at for --unscheduled-after-seconds "
                                 "(spec.schedulerName names no running scheduler), by queue", ["queue"])
        self.unplaceable_workloads = gauge(
            "sluicegate_dispatched_unplaceable_workloads",
            "Running workloads (released, counted in sluicegate_queue_running_workloads) with a pod "
            "that waits for Kubernetes to place it, by queue: running minus these is what runs",
            ["queue"])
        self.cluster_running = Gauge("sluicegate_cluster_running_workloads",
                                     "Running workloads in the whole cluster", registry=r)
        self.cluster_pending = Gauge("sluicegate_cluster_pending_workloads",
                                     "Pending workloads in the whole cluster", registry=r)
        self.wait = Histogram("sluicegate_wait_seconds",
                              "From a workload's creation to its release, by queue: observed once per "
                              "pod this process released, with sluicegate_releases_total (a group's "
                              "pods each count the group's wait)", ["queue"],
                              buckets=WAIT_BUCKETS, registry=r)
        self.releases = Counter("sluicegate_releases",
                                "Pods whose gate this process removed, by queue: counted once when the "
                                "watch shows the pod released with the stamp of this process's own patch "
                                "(however many attempts it took; not a pod released by another replica "
                                "or by hand)", ["queue"],
                                registry=r)
        self.cycle = Histogram("sluicegate_dispatch_cycle_seconds",
                               "Time of one dispatch cycle: snapshot, decision, handing out the writes",
                               buckets=CYCLE_BUCKETS, registry=r)
        self.api_errors = Counter("sluicegate_api_errors",
                                  "Requests to the API server that failed, by operation "
                                  "(ungate, condition, event, status, lease)", ["operation"], registry=r)
        self.leader = Gauge("sluicegate_leader",
                            "1 while this replica holds the leader Lease and dispatches, else 0", registry=r)
        self.assumed = Gauge("sluicegate_assumed_releases",
                             "Releases decided and not yet confirmed by the watch", registry=r)
        for operation in OPERATIONS:
            self.api_errors.labels(operation)
        self.leader.set(0)

    def forget_figures(self) -> None:
        """Drop the per-queue and per-team series and zero the cluster's: a replica that does
        not lead has no figures, and stale ones would keep alerts firing (or quiet)."""
        for family in self.families:
            family.replace({})
        self.cluster_running.set(0)
        self.cluster_pending.set(0)

    def failed(self, operation: str, status: int) -> None:
        self.api_errors.labels(operation if operation in OPERATIONS else "other").inc()

    def released(self, queue: str, waited: float) -> None:
        """The watch shows a pod this process released, whose workload had waited ``waited``
        seconds when the release was decided."""
        self.releases.labels(queue).inc()
        self.wait.labels(queue).observe(max(0.0, waited))
