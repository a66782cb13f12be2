"""The describer's incremental walk of pending pods equals the full one.

Two describers, one incremental and one that looks at every pending pod each cycle, each with an
explainer of its own, go through the same random sequence of changes: workloads arrive and
leave, their reasons change (and a paused queue's message without its reason), time passes,
writes land and the watch shows them, writes fail, pods change under them. After every change
both run a cycle; they must wish the same writes, count the same waiting pods, and name the
same moment a pod becomes due. The incremental one must look at fewer pods once nothing moves.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from controller.describing import Describer
from controller.explaining import Explainer
from controller.managed import Dispatched, ManagedPod, managed_pod
from controller.pacing import run_through
from controller.settings import Settings
from kube.writing import Condition
from policy import keys
from policy.limits import NEVER
from policy.model import State, Workload
from tests.builders import MakePod

SETTINGS = Settings(explain_after_seconds=1.0)
REASONS = (keys.Reason.QUEUE_LIMIT, keys.Reason.TEAM_QUOTA, keys.Reason.QUEUE_PAUSED,
           keys.Reason.WAITING_TURN)


class Recording(Explainer):
    """The real explainer with no workers (nothing is sent unless the test sends it), recording
    every wish that makes a write."""

    def __init__(self) -> None:
        super().__init__(None, concurrency=0, identity="test", leading=lambda: True,  # type: ignore[arg-type]
                         on_error=lambda operation, status: None)
        self.wished: list[tuple[str, Condition]] = []

    def want(self, managed: ManagedPod, condition: Condition, **how: Any) -> bool:
        wrote = super().want(managed, condition, **how)
        if wrote:
            self.wished.append((managed.uid, condition))
        return wrote


@dataclass
class Waiting:
    """What ``policy.waiting.Waiting`` tells the describer: each workload's reason, and its message."""

    reasons: dict[str, tuple[keys.Reason, bool]] = field(default_factory=dict)
    paused_message: str = "queue q is paused"

    def answers(self) -> Iterator[tuple[str, keys.Reason, bool]]:
        for key, (reason, never) in self.reasons.items():
            yield key, reason, never

    def answer(self, key: str) -> tuple[keys.Reason, str]:
        reason, never = self.reasons[key]
        if reason is keys.Reason.QUEUE_PAUSED:
            return reason, self.paused_message
        return reason, (NEVER if never else "") + f"{reason.value} for {key}"


@dataclass
class World:
    managed: dict[str, ManagedPod] = field(default_factory=dict)
    pending: dict[str, Workload] = field(default_factory=dict)
    waiting: Waiting = field(default_factory=Waiting)
    mono: float = 0.0
    made: int = 0

    def add(self, size: int, reason: keys.Reason, never: bool) -> None:
        self.made += 1
        name = f"w{self.made}"
        pods = []
        for i in range(size):
            found = managed_pod(MakePod("ns", f"{name}-{i}").queue("q").team("t").gpus(1).gated().obj())
            self.managed[found.uid] = found
            pods.append(found.pod)
        key = f"ns/{name}"
        self.pending[key] = Workload(key, "ns", "q", "t", tuple(pods), State.PENDING)
        self.waiting.reasons[key] = (reason, never)

    def regroup(self, into: str, key: str) -> None:
        """The pods of ``key`` join workload ``into`` (a pod group forms), keeping their clocks."""
        joined = self.pending.pop(key)
        del self.waiting.reasons[key]
        target = self.pending[into]
        self.pending[into] = replace(target, pods=(*target.pods, *joined.pods))

    def remove(self, key: str) -> None:
        for pod in self.pending.pop(key).pods:
            self.managed.pop(pod.uid, None)
        del self.waiting.reasons[key]

    def show(self, uid: str, condition: Condition | None) -> None:
        """The watch delivers the pod anew, carrying ``condition``."""
        found = self.managed.get(uid)
        if found is None:
            return
        shown = None
        if condition is not None:
            shown = Dispatched(condition.status, condition.reason, condition.message)
        self.managed[uid] = replace(found, condition=shown)


@dataclass
class Side:
    explainer: Recording
    describer: Describer

    @classmethod
    def make(cls, incremental: bool) -> Side:
        explainer = Recording()
        return cls(explainer, Describer(SETTINGS, explainer, None, incremental=incremental))  # type: ignore[arg-type]

    def cycle(self, world: World) -> tuple[dict[tuple[str, str], int], float, list[tuple[str, Condition]]]:
        self.explainer.wished.clear()
        walk = self.describer.pending(world.pending, world.waiting, world.managed,  # type: ignore[arg-type]
                                      world.mono)
        held, due = run_through(walk)
        counts = held.counts
        self.explainer.confirm(world.managed)
        return counts, due, list(self.explainer.wished)


step = st.one_of(
    st.tuples(st.just("add"), st.integers(1, 3), st.sampled_from(REASONS), st.booleans()),
    st.tuples(st.just("reason"), st.integers(0, 50), st.sampled_from(REASONS), st.booleans()),
    st.tuples(st.just("paused"), st.sampled_from(["queue q is paused", "queue q does not exist"])),
    st.tuples(st.just("time"), st.sampled_from([0.0, 0.4, 1.0, 2.5])),
    st.tuples(st.just("remove"), st.integers(0, 50)),
    st.tuples(st.just("regroup"), st.integers(0, 50), st.integers(0, 50)),
    st.tuples(st.just("send"), st.integers(1, 4)),
    st.tuples(st.just("fail"), st.integers(1, 2)),
    st.tuples(st.just("touch"), st.integers(0, 200), st.booleans()),
)


def pick(keys_: list[str], index: int) -> str | None:
    return keys_[index % len(keys_)] if keys_ else None


@settings(max_examples=400, deadline=None)
@given(st.lists(step, min_size=1, max_size=40))
# A condition the watch shows removed by someone else, after the pod had settled.
@example([("add", 1, keys.Reason.QUEUE_LIMIT, False), ("time", 2.5), ("send", 1), ("touch", 0, True)])
# A write that failed after the pod had settled.
@example([("add", 2, keys.Reason.TEAM_QUOTA, True), ("time", 2.5), ("fail", 1)])
def test_the_incremental_walk_wishes_what_a_walk_of_every_pod_wishes(steps: list[tuple[Any, ...]]) -> None:
    world = World()
    incremental, full = Side.make(True), Side.make(False)
    for action, *args in steps:
        if action == "add":
            world.add(*args)
        elif action == "reason" and (key := pick(list(world.pending), args[0])) is not None:
            world.waiting.reasons[key] = (args[1], args[2])
        elif action == "paused":
            world.waiting.paused_message = args[0]
        elif action == "time":
            world.mono += args[0]
        elif action == "remove" and (key := pick(list(world.pending), args[0])) is not None:
            world.remove(key)
        elif action == "regroup" and len(world.pending) > 1:
            into, key = pick(list(world.pending), args[0]), pick(list(world.pending), args[1])
            if into is not None and key is not None and into != key:
                world.regroup(into, key)
        elif action in ("send", "fail"):
            for _ in range(args[0]):
                taken = [side.explainer.next_write() for side in (incremental, full)]
                assert taken[0] == (None if taken[1] is None else (taken[1][0], replace(taken[1][1],
                                                                                       queued=taken[0][1].queued)))
                if taken[0] is None:
                    break
                uid, write = taken[0]
                if action == "send":
                    world.show(uid, write.condition)
                else:
                    for side in (incremental, full):
                        side.explainer.failed(uid, write.condition)
        elif action == "touch" and (uid := pick(sorted(world.managed), args[0])) is not None:
            # Someone else rewrote the pod: the same condition, or none at all.
            found = world.managed[uid]
            kept = found.condition
            world.show(uid, None if args[1] or kept is None else Condition(
                "True" if kept.status == "True" else "False", kept.reason, kept.message))
        assert incremental.cycle(world) == full.cycle(world), (action, args)


def test_once_nothing_moves_the_incremental_walk_looks_at_no_pod() -> None:
    world = World()
    for _ in range(50):
        world.add(2, keys.Reason.QUEUE_LIMIT, False)
    side = Side.make(True)
    side.cycle(world)
    world.mono += 5.0
    side.cycle(world)  # every pod due: each is wished its condition
    while (taken := side.explainer.next_write()) is not None:
        world.show(taken[0], taken[1].condition)
    side.cycle(world)  # the watch shows them: each pod looked at once more, and settled
    before = side.describer.looked_at
    for _ in range(5):
        world.mono += 1.0
        assert side.cycle(world)[2] == []
    assert side.describer.looked_at == before
    world.waiting.reasons["ns/w7"] = (keys.Reason.TEAM_QUOTA, False)
    side.cycle(world)
    assert side.describer.looked_at == before + 2


def test_a_pod_that_joins_another_workload_keeps_the_time_it_was_first_seen_waiting() -> None:
    world = World()
    side = Side.make(True)
    world.add(1, keys.Reason.QUEUE_LIMIT, False)  # w1, first seen at 0
    side.cycle(world)
    world.mono = 0.6
    world.add(1, keys.Reason.QUEUE_LIMIT, False)  # w2, first seen at 0.6
    side.cycle(world)
    world.regroup("ns/w2", "ns/w1")
    side.cycle(world)
    world.mono = 1.2  # w1's pod has waited 1.2 s, w2's 0.6 s
    wished = side.cycle(world)[2]
    assert [uid for uid, _ in wished] == ["uid-ns-w1-0"]
