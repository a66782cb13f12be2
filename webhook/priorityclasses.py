"""The cluster's PriorityClasses, as admission reads them to keep managed pods from preempting.

A pod arrives with its priority and preemptionPolicy already set by the API server from its
class, but a Job's or CronJob's pod template names only the class: admission looks the class
up here to refuse, at the Job's own CREATE, a template whose pods would preempt (rather than
refusing each of its pods later, where only the Job's events show it). One quiet reflector of
PriorityClasses (a handful of cluster-scoped objects); a class too new for the watch is simply
not known, and the pods' own CREATE judges it then.
"""

from __future__ import annotations

from types import MappingProxyType

from kube.cache import Cache
from kube.reflecting import Reflector
from kube.resources import PRIORITY_CLASSES
from policy.priorities import PriorityClass, PriorityClasses


class ClusterPriorityClasses:
    """``classes()``: the PriorityClasses the watch holds now, by name."""

    def __init__(self, reflector: Reflector[PriorityClass]) -> None:
        self.reflector = reflector

    @classmethod
    def watching(cls, cache: Cache) -> ClusterPriorityClasses:
        """Add a quiet PriorityClass reflector to ``cache`` (its readiness waits for it too)."""
        return cls(cache.watch(PRIORITY_CLASSES, PriorityClass.parse, quiet=True))

    def classes(self) -> PriorityClasses:
        return MappingProxyType({c.name: c for c in self.reflector.values()})
