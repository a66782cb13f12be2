"""The fault suite's shared pieces: killing and finding the leading controller, counting the
controller's relists from its own log, judging a record, and writing a scenario's figures.

Every scenario runs under a burst of submissions, watched by the independent recorder, and ends
with the same verdict over its record: no release over a limit in force, every submitted pod
terminal, none released twice, none lost. Its figures go to the file named by
``SLUICEGATE_FAULTS_FIGURES`` (``make faults`` points it at docs/reliability.json), else to a
scratch file of this test run's own (several runs share the machine), so ``make test`` never
rewrites the checked-in figures.

``SLUICEGATE_FAULTS=full`` (``make faults``) runs the longer variants: more kills, more pods.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import os
import signal
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from audit.background import Background
from audit.checking import Limits, lost, released_twice
from audit.connection import ApiError, Connection, Credentials
from audit.records import TERMINAL, Kind, Obj, Record
from audit.reliability import Figures, save, stamp
from audit.timelines import Timeline, violations_over
from controller.managed import LABEL_SELECTOR
from controlplane.deploying import LocalSluicegate
from tests.e2e.conftest import eventually

FULL = os.environ.get("SLUICEGATE_FAULTS", "") == "full"
SUITE = "make faults" if FULL else "make test"
REPLICAS = ("controller", "controller-standby")
RELIST_LINE = "is too old, listing again"  # kube.reflecting logs it at each 410 Gone
MANAGED_PODS = f"Reflector(pods {LABEL_SELECTOR}"  # the controller's reflector of managed pods
DRAIN_SECONDS = 300.0


def scale(quick: int, full: int) -> int:
    """A count for this run: ``quick`` in ``make test``, ``full`` in ``make faults``."""
    return full if FULL else quick


def figures_path() -> Path:
    named = os.environ.get("SLUICEGATE_FAULTS_FIGURES")
    return Path(named) if named else Path(tempfile.gettempdir()) / f"sluicegate-faults-{os.getpid()}.json"


# --- the controller's processes -------------------------------------------------------------


def leader(sluicegate: LocalSluicegate, replicas: Iterable[str] = REPLICAS) -> str | None:
    """The replica whose /metrics says it leads, if exactly one does."""
    leading = []
    for name in replicas:
        try:
            url = f"http://127.0.0.1:{sluicegate.port(name, 'metrics')}/metrics"
            with urllib.request.urlopen(url, timeout=5) as answer:
                if "\nsluicegate_leader 1.0" in answer.read().decode():
                    leading.append(name)
        except OSError:
            continue
    return leading[0] if len(leading) == 1 else None


def kill(sluicegate: LocalSluicegate, name: str) -> None:
    """SIGKILL the process group: no release of the Lease, no drain."""
    state = json.loads((sluicegate.cluster.layout.root / "sluicegate.json").read_text())
    os.killpg(state["pids"][name], signal.SIGKILL)
    eventually(lambda: any(name in problem for problem in sluicegate.dead()), f"{name} to be dead")


def relists(sluicegate: LocalSluicegate, replicas: Iterable[str] = REPLICAS, reflector: str = "") -> int:
    """How many 410 Gone answers the controller's reflectors (those whose name starts with
    ``reflector``, when given) have relisted after, by its logs."""
    total = 0
    for name in replicas:
        try:
            path = sluicegate.log(name)
        except StopIteration:
            continue
        if path.exists():
            total += sum(1 for line in path.read_text(errors="replace").splitlines()
                         if RELIST_LINE in line and reflector in line)
    return total


def rss_mib(pid: int) -> float:
    """A process's resident set, from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"process {pid} has no VmRSS")


# --- the verdict ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Verdict:
    submitted: int
    finished: int
    violations: tuple[str, ...]
    lost: tuple[str, ...]
    twice: tuple[str, ...]

    def check(self) -> None:
        assert self.violations == (), "limits exceeded:\n" + "\n".join(self.violations)
        assert self.lost == (), "pods lost: " + ", ".join(self.lost)
        assert self.twice == (), "pods released twice: " + ", ".join(self.twice)
        assert self.finished == self.submitted


def judge(record: Record, limits: Limits | Timeline, *, deleted: Iterable[str] = ()) -> Verdict:
    """The verdict over every pod of ``record`` that the webhook admitted gated (a pod refused
    never appears). Pods in ``deleted`` (``ns/name``) were deleted on purpose: for them,
    deletion is a terminal phase; for every other pod only Succeeded or Failed is."""
    timeline = limits if isinstance(limits, Timeline) else Timeline(limits)
    on_purpose = set(deleted)
    wanted = [p for p in record.pods.values() if not p.preexisting]
    finished = 0
    histories = record.histories()
    for pod in wanted:
        kinds = {e.kind for e in histories[pod.uid]}
        if kinds & {Kind.SUCCEEDED, Kind.FAILED} or (pod.key in on_purpose and Kind.DELETED in kinds):
            finished += 1
    missing = [str(x) for x in lost(record, wanted, deleted_is_lost=True) if x.namespace + "/" + x.name
               not in on_purpose]
    return Verdict(
        submitted=len(wanted), finished=finished,
        violations=tuple(str(v) for v in violations_over(record, timeline)),
        lost=tuple(missing),
        twice=tuple(t.pod.key for t in released_twice(record)),
    )


def terminal(record: Record) -> int:
    return len({e.uid for e in record.events if e.kind in TERMINAL})


# --- figures --------------------------------------------------------------------------------


@dataclass(slots=True)
class Row:
    """A scenario's figures, filled in as it runs and written when it ends (pass or fail)."""

    scenario: str
    counts: dict[str, float] = field(default_factory=dict)

    def add(self, name: str, value: float = 1) -> None:
        self.counts[name] = self.counts.get(name, 0) + value

    def verdict(self, verdict: Verdict) -> None:
        self.add("submitted", verdict.submitted)
        self.add("finished", verdict.finished)
        self.add("violations", len(verdict.violations))
        self.add("lost", len(verdict.lost))
        self.add("twice", len(verdict.twice))


@contextmanager
def scenario(name: str, suite: str = SUITE) -> Iterator[Row]:
    row = Row(name)
    started = time.monotonic()
    try:
        yield row
    finally:
        known = {f.name for f in fields(Figures)}
        unknown = set(row.counts) - known
        assert not unknown, f"unknown figures {unknown}"
        out = replace(Figures(name, suite=suite), **row.counts)  # type: ignore[arg-type]
        save(figures_path(), replace(out, seconds=round(time.monotonic() - started, 1), when=stamp()))


# --- a steady stream of submissions ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Sent:
    name: str
    status: int
    """201 when created, else the API server's status."""
    message: str = ""
    sent: float = 0.0
    answered: float = 0.0
    """When the request went out and when its answer came (``time.monotonic()``)."""


class Stream:
    """Creates pods one after another, in a background thread, until the block ends: a user
    who keeps submitting while something breaks. ``make(i)`` gives pod ``i``'s manifest.

        with Stream(credentials, make) as stream:
            ...                      # break something
            stream.wait(lambda sent: len(sent) > 10)
        stream.sent                  # every answer, in order
    """

    def __init__(self, credentials: Credentials, make: Callable[[int], Obj], pause: float = 0.05) -> None:
        self.credentials = credentials
        self.make = make
        self.pause = pause
        self.sent: list[Sent] = []
        self._stop = threading.Event()
        self._background = Background("stream")

    async def _run(self) -> None:
        async with Connection(self.credentials, user_agent="sluicegate-faults-stream", connections=2) as conn:
            index = 0
            while not self._stop.is_set():
                manifest = self.make(index)
                meta = manifest["metadata"]
                sent = time.monotonic()
                try:
                    await conn.create(f"/api/v1/namespaces/{meta['namespace']}/pods", manifest)
                    self.sent.append(Sent(meta["name"], 201, sent=sent, answered=time.monotonic()))
                except ApiError as e:
                    self.sent.append(Sent(meta["name"], e.status, e.message, sent, time.monotonic()))
                index += 1
                await asyncio.sleep(self.pause)

    def __enter__(self) -> Stream:
        self._background.__enter__()
        self._future = self._background.start(self._run())
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop submitting (once the pod in flight is answered); safe to call twice."""
        if self._stop.is_set():
            return
        self._stop.set()
        with contextlib.suppress(concurrent.futures.TimeoutError):
            self._future.result(timeout=60)
        self._background.__exit__(None, None, None)

    def wait(self, done: Callable[[list[Sent]], bool], what: str) -> None:
        """Until ``done(answers so far)``."""
        def probe() -> bool:
            if self._future.done():
                self._future.result()  # raises what stopped it
            return done(list(self.sent))

        eventually(probe, what, DRAIN_SECONDS)

    def more(self, count: int, status: Callable[[int], bool], what: str) -> None:
        """Until ``count`` more answers whose status ``status`` accepts have come."""
        start = len([s for s in self.sent if status(s.status)])
        self.wait(lambda sent: len([s for s in sent if status(s.status)]) >= start + count, what)

    @property
    def accepted(self) -> list[Sent]:
        return [s for s in self.sent if s.status == 201]

    @property
    def refused(self) -> list[Sent]:
        return [s for s in self.sent if s.status != 201]
