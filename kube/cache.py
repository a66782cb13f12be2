"""The cache: every object Sluicegate decides over, mirrored from the API server.

One ``Reflector`` per kind. The Cache starts with the admin-owned kinds admission needs
(Queues, Teams, Presets, the Policy) and Namespaces, and gives policy a ``Catalog`` and
``Namespace`` values. Other processes add their own kinds with ``watch`` (the gate controller:
managed pods by label selector, and nodes) without changing this class.

Catalog objects are converted once per change into ``Parsed`` values (the object, or why it
cannot be used), and the ``Catalog`` is rebuilt only after one of them changed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Generic, TypeVar

from kube.connecting import JSON, Connection
from kube.reflecting import Change, Reflector
from kube.resources import NAMESPACES, POLICIES, PRESETS, QUEUES, TEAMS, Resource
from policy import fields, keys
from policy.catalog import UNREADABLE, Catalog, closed_policy, problem_of
from policy.model import Namespace, Policy, Queue, Team
from policy.presets import Preset

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Parsed(Generic[T]):
    """An admin object as converted once: its value, or why it cannot be used."""

    name: str
    value: T | None = None
    problem: str = ""
    raw: JSON | None = None
    """The object itself, kept only when it cannot be used (a broken Policy's stand-in reads it)."""
    status: JSON | None = None
    """The object's status as the API server holds it (None when it has none): the gate
    controller compares it with the status it means to write."""

    def same_but_status(self, other: object) -> bool:
        """Whether ``other`` is this object with at most its status changed: a change that no
        catalog and no decision reads (the broken object's ``raw`` is read for its spec only)."""
        return (isinstance(other, Parsed)
                and (self.name, self.value, self.problem) == (other.name, other.value, other.problem)
                and _spec(self.raw) == _spec(other.raw))


def _spec(raw: JSON | None) -> object:
    return None if raw is None else raw.get("spec")


def status_only(change: Change[Any]) -> bool:
    """A change to an admin object's status alone: the gate controller's own status writes, or
    anyone's. It rebuilds no catalog and wakes no dispatch; the status is still stored, and
    the controller's status rounds compare with it on their own clock."""
    old, new = change.old, change.new
    return isinstance(old, Parsed) and old.same_but_status(new)


def parsing(kind: str, parse: Callable[[JSON], T]) -> Callable[[JSON], Parsed[T]]:
    """A converter that keeps a parse failure as a value instead of dropping the object: any
    error parsing may raise (an absurd quantity included) sets the object apart."""

    def convert(obj: JSON) -> Parsed[T]:
        name = str(fields.obj(obj.get("metadata")).get("name") or "")
        status = obj.get("status")
        status = status if isinstance(status, dict) else None
        try:
            return Parsed(name, parse(obj), status=status)
        except UNREADABLE as e:
            return Parsed(name, None, problem_of(kind, obj, e), obj, status)

    return convert


class Cache:
    """Reflectors sharing one connection, started and stopped together."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self._reflectors: list[Reflector[Any]] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._listeners: list[Callable[[], None]] = []
        self._catalog: Catalog | None = None
        self._previous: Catalog | None = None
        self.queues = self.watch(QUEUES, parsing("Queue", Queue.parse))
        self.teams = self.watch(TEAMS, parsing("Team", Team.parse))
        self.presets = self.watch(PRESETS, parsing("Preset", Preset.parse))
        # Only the Policy named "cluster" counts; the CRD refuses other names.
        self.policies = self.watch(POLICIES, parsing("Policy", Policy.parse),
                                   field_selector=f"metadata.name={keys.POLICY_NAME}")
        self.namespaces = self.watch(NAMESPACES, Namespace.parse)
        for reflector in (self.queues, self.teams, self.presets, self.policies):
            reflector.add_listener(self._catalog_changed)
        self._with_status: dict[str, Reflector[Parsed[Any]]] = {
            QUEUES.plural: self.queues, TEAMS.plural: self.teams, POLICIES.plural: self.policies}

    # --- composition ----------------------------------------------------------------------

    def watch(
        self,
        resource: Resource,
        convert: Callable[[JSON], T],
        *,
        label_selector: str = "",
        field_selector: str = "",
        quiet: bool = False,
    ) -> Reflector[T]:
        """Add a reflector for ``resource``; started at once if the cache already runs.

        A ``quiet`` reflector's changes do not call the ``on_change`` callbacks: for kinds that
        only their own reader follows (the scheduler extender's nodes and bound pods), so that
        a node's status or an unmanaged pod never wakes the dispatch loop."""
        reflector = Reflector(self.connection, resource, convert,
                              label_selector=label_selector, field_selector=field_selector)
        if not quiet:
            reflector.add_listener(self._changed)
        self._reflectors.append(reflector)
        if self._tasks:
            self._start(reflector)
        return reflector

    @property
    def reflectors(self) -> tuple[Reflector[Any], ...]:
        return tuple(self._reflectors)

    def on_change(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback()`` after any change in any reflector (one added later too).
        Returns a function that removes it."""
        self._listeners.append(callback)
        return lambda: self._listeners.remove(callback)

    # --- running --------------------------------------------------------------------------

    def start(self) -> None:
        """Start every reflector as a task of the running loop."""
        if self._tasks:
            return
        for reflector in self._reflectors:
            self._start(reflector)

    def _start(self, reflector: Reflector[Any]) -> None:
        self._tasks.append(asyncio.create_task(reflector.run(), name=f"reflector {reflector.resource}"))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()

    @property
    def synced(self) -> bool:
        """Every reflector has listed at least once."""
        return all(r.synced.is_set() for r in self._reflectors)

    async def wait_synced(self) -> None:
        for reflector in list(self._reflectors):
            await reflector.synced.wait()

    # --- what admission reads -------------------------------------------------------------

    def catalog(self) -> Catalog:
        """The Queues, Teams, Presets and Policy as they are now (rebuilt only after a change)."""
        if self._catalog is None:
            self._catalog = self._build_catalog()
        return self._catalog

    def _build_catalog(self) -> Catalog:
        """A broken Policy fails closed: the last valid one stays in force (``_previous``, the
        catalog built before), and with none known the catalog is closed (see ``policy.catalog``)."""
        invalid: dict[str, str] = {}
        policy = Policy()
        closed: str | None = None
        previous = self._previous
        for parsed in self.policies.values():
            if parsed.value is not None:
                policy = parsed.value
                continue
            invalid[f"Policy/{parsed.name}"] = parsed.problem
            if previous is not None and previous.closed is None:
                policy = previous.policy
            else:
                closed = parsed.problem
                policy = closed_policy(parsed.raw or {})
        catalog = Catalog(
            queues=_by_name("Queue", self.queues.values(), invalid),
            teams=_by_name("Team", self.teams.values(), invalid),
            presets=_by_name("Preset", self.presets.values(), invalid),
            policy=policy,
            invalid=MappingProxyType(invalid),
            closed=closed,
        )
        problem = invalid.get(f"Policy/{keys.POLICY_NAME}")
        if problem:
            effect = "admission of managed pods is closed" if closed else "the last valid one stays in force"
            log.warning("Policy %s does not parse; %s", keys.POLICY_NAME, effect,
                        extra={"fields": {"problem": problem}})
        # A catalog built before the Policy was listed holds defaults, not the last valid
        # Policy: remembering it would let a broken Policy listed next fall back to them.
        if self.policies.synced.is_set() or len(self.policies) > 0:
            self._previous = catalog
        return catalog

    def status(self, resource: Resource, name: str) -> JSON | None:
        """The status of a Queue, Team or the Policy as the watch last showed it ({} when it has
        none); None when the watch does not show the object."""
        reflector = self._with_status.get(resource.plural)
        parsed = reflector.named(name) if reflector is not None else None
        if parsed is None:
            return None
        return parsed.status or {}

    def namespace(self, name: str) -> Namespace | None:
        """The namespace as the cache last saw it."""
        return self.namespaces.named(name)

    async def current_namespace(self, name: str) -> Namespace:
        """The namespace, from the cache when it is opted in there, else read from the API.

        The API server calls the webhook only for namespaces that carry the team label in its
        own view. When the cache disagrees (a namespace created or labelled a moment ago that
        the watch has not delivered yet), trusting it would admit a managed pod ungated; so
        the namespace is read once. Raises ``KubeError`` when that read fails.
        """
        cached = self.namespaces.named(name)
        if cached is not None and cached.opted_in:
            return cached
        obj = await self.connection.get(NAMESPACES.path(name))
        return Namespace.parse(obj)

    # --- listeners ------------------------------------------------------------------------

    def _catalog_changed(self, change: Change[Any]) -> None:
        if not status_only(change):
            self._catalog = None

    def _changed(self, change: Change[Any]) -> None:
        if status_only(change):
            return
        for callback in list(self._listeners):
            try:
                callback()
            except Exception:
                log.exception("a cache listener failed on a change to %s", change.key)


def _by_name(kind: str, entries: Iterable[Parsed[T]], invalid: dict[str, str]) -> MappingProxyType[str, T]:
    out: dict[str, T] = {}
    for parsed in entries:
        if parsed.value is not None:
            out[parsed.name] = parsed.value
        else:
            invalid[f"{kind}/{parsed.name}"] = parsed.problem
    return MappingProxyType(out)
