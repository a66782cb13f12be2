"""Scraping the live processes' /metrics: which series they really export."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from controlplane.deploying import LocalSluicegate


def series(port: int) -> set[str]:
    """The sample names one process serves now (``_bucket``, ``_total`` and the like included)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
        text = answer.read().decode()
    return {sample.name for family in text_string_to_metric_families(text) for sample in family.samples}


def exported(sluicegate: LocalSluicegate) -> set[str]:
    """What every Sluicegate process (webhook, controller replicas) serves together."""
    return set().union(*(series(sluicegate.port(s.name, "metrics")) for s in sluicegate.services))
