"""The scheduler extender's Prometheus metrics.

The extender is ignorable: when it fails, kube-scheduler places pods without it and says so
only in its own log. These series make that visible (an alert on the rate of answers that
were not ``answered``): node pools unenforced and GPUs unpacked for as long as it lasts.
"""

from __future__ import annotations

from typing import Final, Literal

from prometheus_client import CollectorRegistry, Counter, Histogram

Verb = Literal["filter", "prioritize"]
Outcome = Literal["answered", "malformed", "too_large", "not_ready", "error"]
"""answered: a decision; malformed, too_large: a bad request; not_ready: the extender could not
judge (cache not synced, an unreadable Queue); error: a fault of the extender."""

# kube-scheduler waits httpTimeout (1 s shipped) per call; answers take well under that.
LATENCY_BUCKETS: Final = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)


class PlacementMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.requests = Counter(
            "sluicegate_extender_requests",
            "Scheduler-extender calls, by verb and outcome (answered, malformed, too_large, "
            "not_ready, error; all but answered make kube-scheduler go on without the extender)",
            ["verb", "outcome"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "sluicegate_extender_duration_seconds",
            "Time to answer a scheduler-extender call, by verb",
            ["verb"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.left_out = Counter(
            "sluicegate_extender_nodes_left_out",
            "Candidate nodes that filter left out (outside the pod's queue's node pool, or not "
            "known to the extender yet)",
            registry=self.registry,
        )

    def answered(self, verb: str, outcome: Outcome, seconds: float) -> None:
        known: Verb = "prioritize" if verb == "prioritize" else "filter"
        self.requests.labels(known, outcome).inc()
        self.latency.labels(known).observe(seconds)
