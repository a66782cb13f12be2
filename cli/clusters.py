"""How the cluster commands reach a cluster, with kubectl's plugin conventions.

``--kubeconfig`` (else ``$KUBECONFIG``, else ``~/.kube/config``), ``--context``, ``-n`` (else the
context's namespace), ``-A`` and ``-o json|yaml|wide``: what ``kubectl sluicegate`` users
expect. Everything is read with the user's own credentials, through ``kube`` (only reads: get
and list). The objects read are those the gate controller decides over, so that
``cli.standings`` can take the same decision.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from cli.commands import CommandError, add_global_flags
from cli.leadership import stalled
from cli.standings import Observation
from cli.tables import json_text
from kube.connecting import JSON, ApiError, Connection, KubeError
from kube.leasing import LeaseSettings
from kube.reading import list_all, open_as_user
from kube.resources import (
    CORE_EVENTS,
    LEASES,
    NAMESPACES,
    NODES,
    PENDING_PODS,
    PODS,
    POLICIES,
    PRESETS,
    QUEUES,
    TEAMS,
)
from policy import keys
from policy.marks import FIELD_SELECTOR, LABEL_SELECTOR
from process import kubeyaml

T = TypeVar("T")

USER_AGENT: Final = "sluicegate-cli"
OUTPUTS: Final = ("json", "yaml", "wide")


def configure(
    parser: argparse.ArgumentParser, *, namespaced: bool = True, all_namespaces: bool = True
) -> None:
    """Add kubectl's flags: the global ``--kubeconfig``, ``--context``, ``-n`` (which may also
    come before the command), and ``-A``, ``-o``."""
    add_global_flags(parser, namespaced=namespaced)
    if all_namespaces:
        parser.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace")
    parser.add_argument("-o", "--output", choices=OUTPUTS, default="",
                        help="json or yaml for programs, wide for more columns (default: a table)")


def structured(data: Any, output: str) -> str | None:
    """``data`` as JSON or YAML when ``-o`` asks for it, else None (the command prints a table)."""
    if output == "json":
        return json_text(data)
    if output == "yaml":
        return kubeyaml.dump(data, sort_keys=False, allow_unicode=True)
    return None


@dataclass(frozen=True, slots=True)
class Reading:
    """What one command read: the cluster as the controller sees it, and the namespace meant."""

    seen: Observation
    namespace: str  # the -n namespace, or the context's; "" with -A
    pod: JSON | None = None
    events: tuple[JSON, ...] = ()
    forbidden: str = ""  # why the cluster-wide view could not be read (explain goes on without it)
    limited: bool = False  # only the catalog and the namespace's pods were read (``read``'s fallback)
    stalled: str = ""  # why nothing is being released (no controller holds the Lease), else ""
    pending: tuple[JSON, ...] | None = None
    """The namespace's waiting pods as the visibility API serves them; None when not read."""
    unserved: str = ""  # why the visibility API could not be read (not installed, unavailable), else ""


async def _observe(connection: Connection) -> Observation:
    answers = await asyncio.gather(
        list_all(connection, QUEUES),
        list_all(connection, TEAMS),
        list_all(connection, PRESETS),
        list_all(connection, POLICIES, field_selector=f"metadata.name={keys.POLICY_NAME}"),
        list_all(connection, NAMESPACES, label_selector=keys.TEAM_LABEL),
        list_all(connection, PODS, label_selector=LABEL_SELECTOR, field_selector=FIELD_SELECTOR),
        return_exceptions=True,  # every read ends before the connection closes
    )
    lists: list[list[JSON]] = []
    for answer in answers:
        if isinstance(answer, BaseException):
            raise answer
        lists.append(answer)
    queues, teams, presets, policies, namespaces, pods = lists
    return Observation(queues, teams, presets, policies[0] if policies else None, namespaces, pods,
                       time.time(), await _nodes(connection))


async def _nodes(connection: Connection) -> list[JSON] | None:
    """The Nodes, for the node inventory dispatch decides with; None when the reader may not
    list them (then every pod is taken to fit some node, and a NoNodeFits pod reads as releasable)."""
    try:
        return await list_all(connection, NODES)
    except ApiError as e:
        if e.status == 403:
            return None
        raise


async def _observe_namespace(connection: Connection, namespace: str) -> Observation:
    """What a user with read access to the Sluicegate kinds and to one namespace's pods may read:
    the catalog (with the Queue status the controller writes), that namespace (one GET, not a
    cluster-wide list) and its managed pods."""
    queues, teams, presets, policies = await asyncio.gather(
        list_all(connection, QUEUES),
        list_all(connection, TEAMS),
        list_all(connection, PRESETS),
        list_all(connection, POLICIES, field_selector=f"metadata.name={keys.POLICY_NAME}"),
    )
    namespaces: list[JSON] = []
    pods: list[JSON] = []
    if namespace:
        try:
            namespaces.append(await connection.get(NAMESPACES.path(namespace)))
        except ApiError as e:
            if e.status != 403 and not e.not_found:
                raise
        pods = await list_all(connection, PODS, namespace=namespace, label_selector=LABEL_SELECTOR,
                              field_selector=FIELD_SELECTOR)
    return Observation(queues, teams, presets, policies[0] if policies else None, namespaces, pods,
                       time.time())


async def _events(connection: Connection, pod: JSON) -> tuple[JSON, ...]:
    meta = pod.get("metadata") or {}
    namespace, name, uid = meta.get("namespace", ""), meta.get("name", ""), meta.get("uid", "")
    selector = f"involvedObject.name={name},involvedObject.namespace={namespace}"
    found = await list_all(connection, CORE_EVENTS, namespace=namespace, field_selector=selector)
    return tuple(e for e in found if (e.get("involvedObject") or {}).get("uid") in ("", None, uid))


async def _stalled(connection: Connection) -> str:
    """"" while a gate controller holds its Lease (or the user may not read it), else why nothing
    is being released (``cli.leadership``)."""
    lease = LeaseSettings()
    where = f"{lease.namespace}/{lease.name}"
    try:
        found: JSON | None = await connection.get(LEASES.path(lease.name, namespace=lease.namespace))
    except ApiError as e:
        if e.status == 403:
            return ""
        if not e.not_found:
            raise
        found = None
    return stalled(found, time.time(), where=where)


async def _pending(connection: Connection, namespace: str) -> tuple[tuple[JSON, ...] | None, str]:
    """The namespace's waiting pods from the visibility API, and why not when it cannot be read:
    not installed (an older Sluicegate: the API server knows no such group) or unavailable (no
    controller answers it). A user RBAC does not let read it gets None and no reason."""
    try:
        answer = await connection.get(PENDING_PODS.path(namespace=namespace))
    except ApiError as e:
        if e.status == 403:
            return None, ""
        if e.not_found:
            return None, f"the visibility API ({PENDING_PODS.group}) is not installed here"
        if e.status == 503:
            return None, f"the visibility API ({PENDING_PODS.group}) is unavailable: {e.message}"
        raise
    items = answer.get("items")
    return (tuple(i for i in items if isinstance(i, dict)) if isinstance(items, list) else ()), ""


def _forbidden(e: ApiError) -> str:
    return f"not allowed to read the cluster-wide view ({e.message})"


def run_as_user(args: argparse.Namespace, work: Callable[[Connection, str], Awaitable[T]]) -> T:
    """``work`` on a connection opened with the user's kubeconfig and the namespace meant; the
    API server's refusals and an unreachable cluster become one line (``CommandError``)."""
    async def session() -> T:
        user = await open_as_user(args.kubeconfig, args.context, user_agent=USER_AGENT)
        namespace = "" if getattr(args, "all_namespaces", False) else (
            getattr(args, "namespace", "") or user.namespace)
        async with user.connection as connection:
            return await work(connection, namespace)

    try:
        return asyncio.run(session())
    except ApiError as e:
        if e.status == 403:
            raise CommandError(f"forbidden: {e.message}") from e
        raise CommandError(str(e)) from e
    except KubeError as e:
        raise CommandError(str(e)) from e


def read(args: argparse.Namespace) -> Reading:
    """The cluster-wide view (``pods``); when the user may not list every namespace's pods,
    what they may read (``limited``): the catalog with its status, and the pods of their
    namespace. ``pods -A`` (no namespace) then fails as forbidden."""

    async def work(connection: Connection, namespace: str) -> Reading:
        why = await _stalled(connection)
        pending, unserved = await _pending(connection, namespace) if namespace else (None, "")
        try:
            return Reading(await _observe(connection), namespace, stalled=why, pending=pending,
                           unserved=unserved)
        except ApiError as e:
            if e.status != 403 or not namespace:
                raise
        return Reading(await _observe_namespace(connection, namespace), namespace, limited=True, stalled=why,
                       pending=pending, unserved=unserved)

    return run_as_user(args, work)


def read_queues(args: argparse.Namespace) -> Reading:
    """The cluster-wide view (``queues``); when the user may not read it, the Queues alone, with
    the status the controller writes (``limited``): what a role that may read queues reads,
    whatever namespace the kubeconfig names (no pod is read)."""

    async def work(connection: Connection, namespace: str) -> Reading:
        why = await _stalled(connection)
        try:
            return Reading(await _observe(connection), namespace, stalled=why)
        except ApiError as e:
            if e.status != 403:
                raise
        queues = await list_all(connection, QUEUES)
        return Reading(Observation(queues=queues, now=time.time()), namespace, limited=True, stalled=why)

    return run_as_user(args, work)


def read_pod(args: argparse.Namespace, name: str) -> Reading:
    """One pod, its events, and the cluster-wide view when the user may read it (``explain``)."""

    async def work(connection: Connection, namespace: str) -> Reading:
        try:
            pod = await connection.get(PODS.path(name, namespace=namespace))
        except ApiError as e:
            if e.not_found:
                raise CommandError(f'pod "{name}" not found in namespace {namespace}') from e
            raise
        events = await _events(connection, pod)
        why = await _stalled(connection)
        pending, unserved = await _pending(connection, namespace)
        try:
            seen = await _observe(connection)
        except ApiError as e:
            if e.status != 403:
                raise
            return Reading(Observation(now=time.time()), namespace, pod, events, _forbidden(e), stalled=why,
                           pending=pending, unserved=unserved)
        return Reading(seen, namespace, pod, events, stalled=why, pending=pending, unserved=unserved)

    return run_as_user(args, work)
