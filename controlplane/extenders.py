"""The scheduler extender as the local kube-scheduler is told about it.

The entry is the one Sluicegate ships (``manifests/scheduler/scheduler-config.yaml``) with
only what differs on this machine replaced: where the extender listens, how to trust its
certificate (the CA bundle inline, or no verification for loopback TLS), the managed
resources, and optionally the time a call may take. Verbs, weight, ``ignorable`` and
``nodeCacheCapable`` come from the shipped file, so the local control plane runs what users
install.
"""

from __future__ import annotations

import base64
import copy
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

import yaml

from policy import keys

SHIPPED: Final = Path(__file__).resolve().parents[1] / "manifests" / "scheduler" / "scheduler-config.yaml"


class ExtenderError(ValueError):
    """The extender's settings cannot make a working configuration."""


@cache
def shipped_entry() -> dict[str, Any]:
    """The extender entry of the shipped KubeSchedulerConfiguration."""
    config = yaml.safe_load(SHIPPED.read_text())
    (entry,) = config["extenders"]
    if not isinstance(entry, dict):
        raise ExtenderError(f"{SHIPPED}: extenders[0] is not a mapping")
    return entry


@dataclass(frozen=True, slots=True)
class SchedulerExtender:
    """Where kube-scheduler reaches the extender and how it trusts it."""

    url: str  # e.g. https://127.0.0.1:8444, without the verb
    ca_bundle: bytes = b""  # PEM of the CA that signed the extender's certificate
    insecure: bool = False  # TLS without verifying the certificate (loopback only)
    managed_resources: tuple[str, ...] = keys.DEFAULT_MANAGED_RESOURCES
    http_timeout: str = ""  # a Go duration; empty keeps the shipped one

    def __post_init__(self) -> None:
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ExtenderError(f"extender URL {self.url!r} is not http(s)://host:port")
        if parts.scheme == "https" and not self.ca_bundle and not self.insecure:
            raise ExtenderError("an https extender needs a CA bundle, or insecure=True on loopback")
        if self.insecure and parts.hostname not in ("127.0.0.1", "::1", "localhost"):
            raise ExtenderError(f"insecure TLS is for loopback only, not {parts.hostname}")
        if not self.managed_resources:
            raise ExtenderError("name at least one managed resource, or every pod goes to the extender")

    def entry(self) -> dict[str, Any]:
        """The ``extenders[]`` entry of a KubeSchedulerConfiguration."""
        entry = copy.deepcopy(shipped_entry())
        entry["urlPrefix"] = self.url.rstrip("/")
        https = self.url.startswith("https://")
        entry["enableHTTPS"] = https
        entry.pop("tlsConfig", None)
        if https and self.insecure:
            entry["tlsConfig"] = {"insecure": True}
        elif https:
            entry["tlsConfig"] = {"caData": base64.b64encode(self.ca_bundle).decode()}
        entry["managedResources"] = [{"name": r, "ignoredByScheduler": False} for r in self.managed_resources]
        if self.http_timeout:
            entry["httpTimeout"] = self.http_timeout
        return entry
