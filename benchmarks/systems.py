"""The systems under test, behind one interface, so the runner treats them alike.

A ``System`` is started on a cluster, configured with a scenario's queues and limits, left to
release the load's pods, asked to show that it really managed them, and stopped. It tells the
runner what it calls things (``naming``: gates, queue label, team label), how its namespaces
must be labelled, which processes to measure (CPU, RSS) and who it is to the API server, so
that its requests can be counted (``benchmarks.counting``).

The implementations: ``benchmarks.bare`` (the bare ungater, the ceiling), ``benchmarks.kueue``
(Kueue v0.17.0, shipped and raised client limits) and ``benchmarks.sluicegate``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from audit.checking import Cap, Limits
from audit.loading import Load
from audit.naming import Naming
from benchmarks.scenarios import Scenario
from controlplane.launching import LocalCluster

Progress = Callable[[str], None]
Obj = dict[str, Any]


class SystemFailure(RuntimeError):
    """A system could not be started, configured or stopped."""


@dataclass(frozen=True, slots=True)
class Setup:
    """One run, as a system sees it: the scenario, the load (its run label, queue names and
    namespaces) and the namespaces created for it."""

    scenario: Scenario
    load: Load
    namespaces: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Account:
    """A system's own account of a run: ``problems`` fail the run; ``notes`` are reported
    beside its figures (say, a metric of the system's that disagrees with the record)."""

    problems: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


class System(Protocol):
    key: str
    """Short and stable: file names and table columns (``bare``, ``kueue``, ``sluicegate``)."""
    title: str
    naming: Naming
    namespace_labels: Mapping[str, str]
    gates_by_driver: bool
    """The load driver writes the gates at creation (no webhook of the system's does)."""
    subjects: Sequence[Obj]
    """Who the system is to the API server (FlowSchema subjects: its users or ServiceAccounts),
    so that its requests are counted apart (``benchmarks.counting``)."""

    def prepare(self, cluster: LocalCluster) -> None:
        """Before the cluster starts: what its components must know of the system (Sluicegate's
        scheduler extender, which kube-scheduler is configured with when it starts)."""

    def start(self, cluster: LocalCluster, progress: Progress) -> None: ...

    def configure(self, setup: Setup) -> None:
        """Queues and limits for this run; returns once pods may be submitted."""

    def processes(self) -> Mapping[str, int]:
        """The system's processes by role (``controller``: process id), while it runs."""

    def limits(self, setup: Setup) -> Limits:
        """What the system was configured to enforce: a release beyond it fails the run."""

    def finish(self, setup: Setup) -> Account:
        """Called once every pod finished: the system's own account of the run (no problems
        when it released every pod of the run itself)."""

    def version(self) -> str: ...

    def stop(self) -> None: ...


def queue_limits(setup: Setup) -> Limits:
    """Each queue at most ``max_running`` pods and as many GPUs (every pod asks for one)."""
    per_queue = Cap(running=setup.scenario.max_running, gpus=setup.scenario.max_running * setup.load.gpus)
    return Limits(queues={q: per_queue for q in setup.load.queues})


def apply(cluster: LocalCluster, *objects: Obj) -> None:
    """``kubectl apply`` as the cluster's admin."""
    cluster.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                          "items": list(objects)}))
