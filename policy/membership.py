"""Which pods count, and toward which team and queue: the one rule the controller and the CLI
share (the simulator has no namespaces: each record carries the team admission stamped, which
is what this rule says of a namespace that keeps its team).

A pod counts toward the team and the queue admission stamped on it (its ``sluicegate.dev/team``
and ``sluicegate.dev/queue`` labels), never toward what its namespace says now:

* a released pod counts there whatever its namespace says now: it holds its slot and its
  requests until it ends, so relabelling a namespace never lets a queue or a team go over its
  limits;
* a gated pod whose namespace no longer opts in to that team (the label was removed, or names
  another team) does not reach dispatch: it waits with ``NamespaceLeftTeam`` until the label
  says that team again, or it is deleted and submitted anew;
* any other pod counts only if admission marked it (``policy.marks.counts_for_dispatch``).

A gated pod whose DRA claims ask for more than admission counted is held before dispatch too
(``ClaimsChanged``, ``policy.devices.claims_changed``); only the gate controller watches claims,
so the CLI and the visibility API read that from the condition it wrote (``held_for_claims``).

Pure: the caller says which team the pod's namespace opts in to now, and whether admission
marked the pod (the controller works that out once per change of the pod, not per cycle).
"""

from __future__ import annotations

from enum import Enum

from policy import keys
from policy.pods import Pod


class Membership(Enum):
    COUNTS = "counts"
    """It goes to dispatch, and counts toward ``pod.team`` and ``pod.queue``."""
    LEFT_TEAM = "left its team"
    """Gated, and its namespace left the team admission stamped: held, ``NamespaceLeftTeam``."""
    NOTHING = "counts for nothing"
    """Admission never marked it, or it was withdrawn: neither released nor counted."""


def membership(pod: Pod, namespace_team: str | None, *, marked: bool) -> Membership:
    """Where ``pod`` stands, given the team its namespace opts in to now (None: none) and
    whether admission marked it (``counts_for_dispatch(pod)``)."""
    if pod.gated and namespace_team != pod.team:
        return Membership.LEFT_TEAM
    return Membership.COUNTS if marked else Membership.NOTHING


def left_team_message(pod: Pod) -> str:
    """The message of the ``NamespaceLeftTeam`` condition of a gated pod whose namespace left
    its team."""
    return (
        f"namespace {pod.namespace} is no longer opted in to team {pod.team}, which admitted this "
        f"pod to queue {pod.queue}: it is not released until the namespace's label "
        f"{keys.TEAM_LABEL} says {pod.team} again; delete it and submit it anew to be judged as "
        "the namespace is now"
    )


def held_for_claims(pod: Pod) -> bool:
    """Gated, and the gate controller holds it because its DRA claims are not what admission
    counted (its condition says ``ClaimsChanged``): readers that do not watch claims take the
    controller's word, and leave it out of the decision they take again."""
    return pod.gated and pod.condition_reason == keys.Reason.CLAIMS_CHANGED.value
