"""Builders for run records and setups, for the simulator and report tests.

``job("a1", "train", at=0, runs=100)`` is a workload of queue ``train`` submitted ``at``
seconds after ``T0`` that ran ``runs`` seconds. By default it ran at once (released and bound
when submitted); ``waited`` moves its release later. Setups are made from the same YAML
objects an administrator writes (``MakeQueue`` & co.), parsed as the CLI parses them.
"""

from __future__ import annotations

from types import MappingProxyType

from policy import keys
from records.trace import Phase, Record
from simulator.setups import Setup, parse_setup
from tests.builders import T0, MakePolicy, MakeQueue, MakeTeam


def job(
    name: str,
    queue: str,
    *,
    at: float,
    runs: float,
    team: str = "",
    gpus: int = 1,
    priority: int = 0,
    workflow: str = "",
    limit: int | None = None,
    waited: float = 0.0,
    namespace: str = "ml",
    submitter: str = "",
) -> Record:
    released = T0 + at + waited
    return Record(
        namespace=namespace,
        name=name,
        queue=queue,
        submitted=T0 + at,
        phase=Phase.SUCCEEDED,
        team=team,
        workflow=workflow,
        workflow_max_running=limit,
        submitter=submitter,
        priority=priority,
        requests=MappingProxyType({keys.GPU_RESOURCE: gpus * 1000}),
        released=released,
        bound=released,
        finished=released + runs,
    )


def setup(
    *queues: MakeQueue,
    teams: tuple[MakeTeam, ...] = (),
    policy: MakePolicy | None = None,
    name: str = "setup",
) -> Setup:
    documents = [(name, q.obj()) for q in queues] + [(name, t.obj()) for t in teams]
    if policy is not None:
        documents.append((name, policy.obj()))
    return parse_setup(documents, name)
