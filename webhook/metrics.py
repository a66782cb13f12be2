"""The admission server's Prometheus metrics, in a registry of their own (one per app, so
tests can build several apps in one process)."""

from __future__ import annotations

from typing import Any, Final

from prometheus_client import CollectorRegistry, Counter, Histogram

# Admission sits in the API server's request path with a 5 s timeout; the interesting range is
# sub-millisecond to a few hundred milliseconds.
LATENCY_BUCKETS: Final = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
)
# Label values come from requests; only known ones are used, so a hostile body cannot grow
# the number of series.
KINDS: Final = frozenset({"Pod", "Job", "CronJob"})
OPERATIONS: Final = frozenset({"CREATE", "UPDATE", "DELETE", "CONNECT"})


class AdmissionMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.requests = Counter(
            "sluicegate_admission_requests",
            "Admission requests answered, by operation, kind and result "
            "(allowed, patched, denied, invalid: a malformed request, error)",
            ["operation", "kind", "result"],
            registry=self.registry,
        )
        self.denials = Counter(
            "sluicegate_admission_denials",
            "Admission requests refused, by reason",
            ["reason"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "sluicegate_admission_duration_seconds",
            "Time to answer an admission review, by webhook (mutate or validate): every review that "
            "parsed, answered or failed (its count is the reviews received)",
            ["webhook"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )

        self.errors = Counter(
            "sluicegate_admission_errors",
            "Reviews that parsed and could not be answered (the API server refuses what they ask "
            "for), by webhook: a subset of sluicegate_admission_duration_seconds_count, so their "
            "ratio is at most 1. A body that is not an AdmissionReview is result=invalid of "
            "sluicegate_admission_requests_total and counts in neither",
            ["webhook"],
            registry=self.registry,
        )
        for webhook in ("mutate", "validate"):
            self.errors.labels(webhook)

        self._answered: dict[tuple[str, str, str], Any] = {}

    def answered(self, operation: str, kind: str, result: str) -> None:
        labels = (
            operation if operation in OPERATIONS else "other", kind if kind in KINDS else "other", result
        )
        child = self._answered.get(labels)
        if child is None:  # labels() takes a lock and builds a key; each series is looked up once
            child = self._answered[labels] = self.requests.labels(*labels)
        child.inc()
