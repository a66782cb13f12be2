"""The recorder's Prometheus metrics, in a registry of its own."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram


class RecorderMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.changes = Counter(
            "sluicegate_recorder_changes", "Pod lifecycle changes recorded", registry=self.registry
        )
        self.written = Counter(
            "sluicegate_recorder_written", "Pod records written to the database", registry=self.registry
        )
        self.lost = Counter(
            "sluicegate_recorder_lost",
            "Pods found deleted after a restart, recorded without their end (phase Deleted)",
            registry=self.registry,
        )
        self.failures = Counter(
            "sluicegate_recorder_write_failures", "Batched writes that failed", registry=self.registry
        )
        self.flush_seconds = Histogram(
            "sluicegate_recorder_flush_seconds",
            "Time to write one batch",
            buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0),
            registry=self.registry,
        )
        self.requests = Counter(
            "sluicegate_recorder_requests", "Record reads served, by result", ["result"],
            registry=self.registry,
        )
