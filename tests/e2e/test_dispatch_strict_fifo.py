"""A StrictFIFO queue on the real control plane: a sweep at its workflow limit is passed over,
and the queue keeps releasing the work behind it. Checked from the auditor's record."""

from __future__ import annotations

from audit.checking import Cap, Limits, lost, released_twice, violations
from audit.connection import Credentials
from audit.recording import recording
from audit.records import Kind
from policy import keys
from tests.e2e.scenes import HELD_SECONDS, Scene, first, only

DRAIN_SECONDS = 120.0  # a bound for waiting on the scene, not a performance target


def test_a_strict_fifo_queue_keeps_releasing_while_a_sweep_at_its_limit_has_trials_pending(
    scene: Scene, credentials: Credentials
) -> None:
    team = scene.team("vision")
    queue = scene.queue("fifo", ordering="StrictFIFO")
    namespace = scene.namespace(team)
    trial = {"labels": {keys.WORKFLOW_LABEL: "lr-sweep"},
             "annotations": {keys.WORKFLOW_MAX_RUNNING_ANNOTATION: "2"}}
    with recording(credentials, selector=scene.selector) as recorder:
        # The first 2 trials fill the sweep's limit and run until the test ends them; the other
        # 4 are submitted before the other work, so they stand ahead of it in the queue.
        scene.pods(namespace, queue, 2, prefix="trial", seconds=HELD_SECONDS, **trial)
        recorder.wait(lambda t: t.released >= 2, DRAIN_SECONDS)
        scene.pods(namespace, queue, 4, prefix="trial", start=2, seconds=1, **trial)
        scene.wait_reason(namespace, ["trial02", "trial05"], keys.Reason.WORKFLOW_LIMIT.value)
        scene.pods(namespace, queue, 3, prefix="job", seconds=1)
        recorder.wait(lambda t: t.finished >= 3, DRAIN_SECONDS)  # only the other work can finish
        held = {p: scene.condition(namespace, p) for p in ("trial02", "trial03", "trial04", "trial05")}
        scene.finish(namespace, "trial00", "trial01")
        recorder.wait(lambda t: t.finished >= 9, DRAIN_SECONDS)
        record = recorder.snapshot()

    # The trials still waiting were told their workflow's limit, not stopped behind one another.
    for name, condition in held.items():
        assert condition is not None and condition.get("reason") == keys.Reason.WORKFLOW_LIMIT.value, name
        assert condition.get("message") == f"workflow {namespace}/lr-sweep: 2/2 running", name
    # The work behind the sweep went while its trials waited.
    waiting_trials = [only(record, namespace, f"trial{i:02d}") for i in range(2, 6)]
    first_waiting_trial = min(first(record, p, Kind.UNGATED).at for p in waiting_trials)
    jobs = [first(record, only(record, namespace, f"job{i:02d}"), Kind.UNGATED).at for i in range(3)]
    assert all(at < first_waiting_trial for at in jobs), (jobs, first_waiting_trial)
    assert violations(record, Limits(workflows={f"{namespace}/lr-sweep": Cap(running=2)})) == []
    assert lost(record) == [] and released_twice(record) == []
