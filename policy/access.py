"""Who may use which queue and preset, and how a refusal says so.

Each predicate is exported on its own so the CLI can explain a decision the same way admission
made it. Denial messages say what was wrong and what is allowed instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from policy.catalog import Catalog
from policy.model import Namespace, Queue, Team
from policy.pods import Submitter


@dataclass(frozen=True, slots=True)
class Who:
    """A submitter together with the teams they count as a member of."""

    submitter: Submitter
    teams: frozenset[str]

    def describe(self) -> str:
        """``user alice (team vision)``, ``user bob (teams a, b)``, ``user carol (no team)``."""
        names = sorted(self.teams)
        if not names:
            membership = "no team"
        elif len(names) == 1:
            membership = f"team {names[0]}"
        else:
            membership = "teams " + ", ".join(names)
        return f"user {self.submitter.user} ({membership})"


def teams_of(submitter: Submitter, namespace: Namespace, catalog: Catalog) -> frozenset[str]:
    """The teams whose members name the user or one of their groups.

    A team with no members counts everyone who may create pods in its namespaces, so the
    namespace's own team counts the submitter when it names none; a namespace's team that has
    no Team object is treated the same way (no members, no limits). A Team whose spec is
    broken counts no one: its members cannot be read, and reading them as "none" would let
    everyone in.
    """
    teams: Mapping[str, Team] = catalog.teams
    out = {
        team.name
        for team in teams.values()
        if submitter.user in team.members.users or submitter.groups & team.members.groups
    }
    own = namespace.team
    if own is None or catalog.problem("Team", own) is not None:
        return frozenset(out)
    if own not in teams or teams[own].members.everyone:
        out.add(own)
    return frozenset(out)


def who(submitter: Submitter, namespace: Namespace, catalog: Catalog) -> Who:
    return Who(submitter, teams_of(submitter, namespace, catalog))


def queue_admits(queue: Queue, person: Who) -> bool:
    """The queue's access list names the user, one of their groups or one of their teams."""
    access = queue.access
    return (
        access.open
        or person.submitter.user in access.users
        or bool(person.submitter.groups & access.groups)
        or bool(person.teams & access.teams)
    )


def namespace_allows_queue(namespace: Namespace, queue: str) -> bool:
    return namespace.allowed_queues is None or queue in namespace.allowed_queues


def usable_queues(namespace: Namespace, catalog: Catalog, person: Who) -> list[str]:
    """The existing queues this namespace allows that admit ``person``, by name."""
    return sorted(
        name
        for name, queue in catalog.queues.items()
        if namespace_allows_queue(namespace, name) and queue_admits(queue, person)
    )


def usable_presets(namespace: Namespace, catalog: Catalog) -> list[str]:
    """The existing presets this namespace allows (its defaults always count), by name."""
    return sorted(name for name in catalog.presets if namespace_allows_preset(namespace, name))


def namespace_allows_preset(namespace: Namespace, preset: str) -> bool:
    return (
        namespace.allowed_presets is None
        or preset in namespace.allowed_presets
        or preset in namespace.default_presets
    )


def queue_alternatives(namespace: Namespace, catalog: Catalog, person: Who) -> str:
    """The tail of a queue denial: what this namespace may use instead."""
    names = usable_queues(namespace, catalog, person)
    if not names:
        return f"no queue this namespace may use is open to user {person.submitter.user}"
    return "this namespace may use: " + ", ".join(names)


def preset_alternatives(namespace: Namespace, catalog: Catalog) -> str:
    names = usable_presets(namespace, catalog)
    if not names:
        return "this namespace may use no presets"
    return "this namespace may use presets: " + ", ".join(names)


def check_queue(
    namespace: Namespace, catalog: Catalog, person: Who, queue: str, source: str = ""
) -> str | None:
    """Why ``person`` may not submit to ``queue`` from ``namespace``, or None when they may.

    ``source`` says where the queue name came from when the pod did not name it itself, e.g.
    `` (from preset "a")``; it goes right after the queue's name.
    """
    subject = f'queue "{queue}"{source}'
    # The namespace's list first, so a refusal never tells a namespace which queues it may not
    # use exist, nor shows their specs.
    if not namespace_allows_queue(namespace, queue):
        return (
            f"{subject} is not allowed in namespace {namespace.name}; "
            f"{queue_alternatives(namespace, catalog, person)}"
        )
    problem = catalog.problem("Queue", queue)
    if problem is not None:
        return f"{subject} is invalid ({problem}); {queue_alternatives(namespace, catalog, person)}"
    found = catalog.queues.get(queue)
    if found is None and (namespace.allowed_queues is not None or source):
        # The namespace's list, a default or a preset names it: the admins' mistake, no secret.
        return f"{subject} does not exist; {queue_alternatives(namespace, catalog, person)}"
    if found is None or not queue_admits(found, person):
        # A queue the user named, in a namespace without a list: missing reads as not open, so
        # a refusal never tells which queues exist.
        return (
            f"{subject} is not open to {person.describe()}{_broken_team(namespace, catalog)}; "
            f"{queue_alternatives(namespace, catalog, person)}"
        )
    return None


def _broken_team(namespace: Namespace, catalog: Catalog) -> str:
    """A note for a refusal when the namespace's Team is broken and so counts no one."""
    own = namespace.team
    if own is None or catalog.problem("Team", own) is None:
        return ""
    return f" (Team {own} is invalid and counts no members until it is fixed)"
