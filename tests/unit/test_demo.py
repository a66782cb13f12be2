"""The demo's pure parts: the board the view shows, the closing summary from an auditor's record,
the plain lines, and the story itself."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console

from audit.checking import Cap, Limits
from demo import board as boards
from demo import story
from demo.board import PLACEMENT, UNEXPLAINED, board
from demo.playing import denial
from demo.showing import LiveView, PlainView, summary_lines
from demo.summary import limits, runs, summarize
from policy import keys
from policy.keys import UNPLACEABLE
from records.trace import Phase
from tests.audit_stories import WALL0, Story

Obj = dict[str, Any]


def queue(name: str, priority: int, max_running: int | None = None, gpus: str | None = None) -> Obj:
    spec: Obj = {"priority": priority}
    if max_running is not None:
        spec["maxRunning"] = max_running
    if gpus is not None:
        spec["quota"] = {keys.GPU_RESOURCE: gpus}
    return {"metadata": {"name": name}, "spec": spec}


def pod(name: str, queue: str, *, gated: bool = False, phase: str = "Pending", gpus: int = 1,
        team: str = "vision", dispatched: tuple[str, str, str] | None = None, namespace: str = "ns") -> Obj:
    amount = {keys.GPU_RESOURCE: str(gpus)}
    out: Obj = {
        "metadata": {"name": name, "namespace": namespace,
                     "labels": {keys.QUEUE_LABEL: queue, keys.TEAM_LABEL: team}},
        "spec": {"containers": [{"name": "main", "resources": {"requests": amount, "limits": amount}}]},
        "status": {"phase": phase},
    }
    if gated:
        out["spec"]["schedulingGates"] = [{"name": keys.GATE}]
    if dispatched is not None:
        status, reason, message = dispatched
        out["status"]["conditions"] = [{"type": keys.CONDITION, "status": status, "reason": reason,
                                        "message": message}]
    return out


HELD = ("False", "WorkflowLimit", "workflow ns/w: 4/4 running")
STUCK = ("True", "Dispatched", UNPLACEABLE + "0/4 nodes")
QUEUES = [queue("sweeps", 0, 24, "16"), queue("urgent", 100, 2), queue("notebooks", 20, 16, "8")]


def test_the_board_counts_pending_running_and_finished_per_queue_and_gpus_per_team() -> None:
    pods = [
        pod("t1", "sweeps", phase="Running"), pod("t2", "sweeps", phase="Succeeded"),
        pod("t3", "sweeps", gated=True, dispatched=HELD),
        pod("t4", "sweeps", gated=True),
        pod("big", "urgent", gpus=16, team="nlp", dispatched=STUCK),
    ]
    shown = board(pods, QUEUES)

    rows = {r.name: (r.limit, r.pending, r.finished, r.gpu_use) for r in shown.queues}
    assert rows == {"urgent": ("1/2", 0, 0, "16/-"), "notebooks": ("0/16", 0, 0, "0/8"),
                    "sweeps": ("1/24", 2, 1, "1/16")}
    assert [r.name for r in shown.queues] == ["urgent", "notebooks", "sweeps"]
    assert shown.teams == {"nlp": 16, "vision": 1}
    # The unplaceable pod comes first and is told apart from the held ones.
    assert [(w.pod, w.reason, w.released) for w in shown.waiting] == [
        ("ns/big", PLACEMENT, True), ("ns/t3", "WorkflowLimit", False), ("ns/t4", UNEXPLAINED, False)]
    assert shown.waiting[0].message == UNPLACEABLE + "0/4 nodes"
    assert shown.reasons()[("sweeps", "WorkflowLimit")] == (1, "workflow ns/w: 4/4 running")


NOWHERE = ("False", "NoNodeFits",
           "needs 16 nvidia.com/gpu on one node; the largest node of the cluster has 8")


def test_a_pod_no_node_fits_waits_gated_with_its_reason_and_its_team_holds_no_gpu_for_it() -> None:
    giant = pod("giant", "urgent", gated=True, gpus=16, team="nlp", dispatched=NOWHERE)
    stuck = pod("tune", "urgent", gpus=8, team="nlp", dispatched=STUCK)
    shown = board([giant, stuck], QUEUES)
    assert shown.teams == {"nlp": 8}
    assert [(w.pod, w.reason, w.released) for w in shown.waiting] == [
        ("ns/tune", PLACEMENT, True), ("ns/giant", "NoNodeFits", False)]
    assert boards.no_node_fits(giant) == NOWHERE[2]
    assert boards.no_node_fits(stuck) is None and boards.unplaceable(giant) is None


def test_a_dispatched_pod_that_is_placed_is_running_not_waiting() -> None:
    placed = pod("p", "urgent", phase="Running",
                 dispatched=("True", "Dispatched", "dispatched by queue urgent"))
    assert board([placed], QUEUES).waiting == ()
    assert boards.unplaceable(placed) is None


def test_the_view_recognises_the_words_the_gate_controller_writes() -> None:
    assert boards.UNPLACEABLE == UNPLACEABLE


def sweep_and_urgent() -> Story:
    """Four trials of a sweep, two at a time, and an urgent pod that arrives while two wait."""
    s = Story()
    for i in range(4):
        s.pod(f"trial-{i}", 0.0, queue="sweeps", workflow=story.SWEEP)
    s.lifecycle("trial-0", 0.5, 10).lifecycle("trial-1", 0.5, 10)
    s.pod("urgent", 2.0, queue=story.URGENT_QUEUE, gpus=2).lifecycle("urgent", 2.3, 8)
    s.lifecycle("trial-2", 10.2, 20).lifecycle("trial-3", 10.2, 20)
    return s


def test_runs_take_each_pods_first_transitions_as_wall_clock_times() -> None:
    ran = {r.name: r for r in runs(sweep_and_urgent().record())}
    urgent = ran["urgent"]
    assert (urgent.submitted, urgent.released, urgent.bound, urgent.finished) == (
        WALL0 + 2.0, WALL0 + 2.3, WALL0 + 2.3, WALL0 + 8)
    assert urgent.phase is Phase.SUCCEEDED and urgent.amount() == 2 and urgent.node == "gpu-node-0"


def test_the_summary_says_the_urgent_pod_went_before_the_trials_that_were_waiting() -> None:
    summary = summarize(sweep_and_urgent().record(), Limits(workflows={f"ns/{story.SWEEP}": Cap(running=2)}),
                        until=WALL0 + 20, refused="no", unplaceable={})
    assert round(summary.urgent_wait or 0, 6) == 0.3
    assert summary.trial_waits.count == 4 and round(summary.trial_waits.mean or 0, 6) == 5.35
    assert summary.overtaken == 2 and summary.urgent_first
    assert summary.violations == ()
    lines = {q.queue: q for q in summary.queues}
    assert (lines["sweeps"].pods, lines["sweeps"].released, lines["sweeps"].waiting) == (4, 4, 0)
    # GPU-hours by records.accounting: 4 trials of 1 GPU for 9.5 s and 9.8 s, the urgent 2 GPUs for 5.7 s.
    assert round(lines["sweeps"].gpu_hours * 3600, 6) == 2 * 9.5 + 2 * 9.8
    assert round(lines[story.URGENT_QUEUE].gpu_hours * 3600, 6) == 2 * 5.7


def test_a_pod_released_but_never_placed_counts_no_gpu_hours_only_the_quota_it_held() -> None:
    """The story's case of a pod dispatched that Kubernetes cannot place: released at 3, never
    bound, deleted at 15 when the story ends (4 GPUs: 48 quota-seconds, no GPU-second). The
    urgent pod beside it, bound at 2.3, keeps its 2 × 5.7 GPU-seconds."""
    s = sweep_and_urgent()
    s.pod("big", 2.5, queue=story.URGENT_QUEUE, gpus=4).release("big", 3.0).delete("big", 15.0)
    summary = summarize(s.record(), Limits(), until=WALL0 + 20, refused="no", unplaceable={"ns/big": "0/4"})
    urgent = {q.queue: q for q in summary.queues}[story.URGENT_QUEUE]
    assert (urgent.pods, urgent.released) == (2, 2)
    assert round(urgent.gpu_hours * 3600, 6) == 2 * 5.7
    assert round(urgent.quota_hours * 3600, 6) == 4 * 12
    text = summary_lines(summary, "bob")
    header = next(line for line in text if "GPU-hours" in line and "queue" in line)
    assert header.split()[-2:] == ["unplaced", "quota-hours"]
    row = next(line for line in text if line.split()[0] == story.URGENT_QUEUE)
    assert row.split()[-2:] == ["0.0032", "0.0133"]  # 11.4 GPU-s, 48 quota-s


def test_the_summary_reports_a_workflow_that_ran_over_its_limit() -> None:
    summary = summarize(sweep_and_urgent().record(), Limits(workflows={f"ns/{story.SWEEP}": Cap(running=1)}),
                        until=WALL0 + 20, refused="", unplaceable={})
    assert summary.violations
    assert summary.violations[0].startswith(f"workflow ns/{story.SWEEP}: 2 running > limit 1")
    text = "\n".join(summary_lines(summary, "bob"))
    assert "limits: EXCEEDED:" in text and "refused: NOT REFUSED: bob was admitted" in text


def test_limits_come_from_the_objects_and_the_workflow_limit_admission_wrote_on_the_pods() -> None:
    trial = pod("t", "sweeps")
    trial["metadata"]["labels"][keys.WORKFLOW_LABEL] = "w"
    trial["metadata"]["annotations"] = {keys.WORKFLOW_MAX_RUNNING_ANNOTATION: "4"}
    team = {"metadata": {"name": "vision"}, "spec": {"maxRunning": 20, "quota": {keys.GPU_RESOURCE: "24"}}}
    policy = {"metadata": {"name": "cluster"}, "spec": {"quota": {keys.GPU_RESOURCE: "32"}}}
    found = limits(QUEUES, [team], policy, [trial])
    assert found.queues["sweeps"] == Cap(running=24, gpus=16) and found.queues["urgent"] == Cap(running=2)
    assert found.teams["vision"] == Cap(running=20, gpus=24) and found.cluster == Cap(gpus=32)
    assert found.workflows == {"ns/w": Cap(running=4)}


def test_plain_lines_tell_each_pods_reason_once_and_leave_the_unplaceable_one_to_the_story() -> None:
    out = io.StringIO()
    view = PlainView(out)
    held = pod("t3", "sweeps", gated=True, dispatched=HELD)
    big = pod("big", "urgent", gpus=16, dispatched=STUCK)
    view.update(1.0, board([held, big], QUEUES))
    view.update(1.5, board([held, big], QUEUES))
    text = out.getvalue()
    assert text.count("ns/t3 waits in sweeps: WorkflowLimit: workflow ns/w: 4/4 running") == 1
    assert "ns/big" not in text
    assert text.count("queues: ") == 1  # figures every few seconds, not every update


def test_the_summary_lines_quote_the_refusal_and_the_schedulers_words() -> None:
    summary = summarize(sweep_and_urgent().record(), Limits(), until=WALL0 + 20,
                        refused='queue "urgent-retrain" is not open to user bob',
                        unplaceable={"nlp/big": "0/4 nodes are available"})
    text = summary_lines(summary, "bob (vision-devs)", {"nlp/giant": NOWHERE[2]})
    assert 'refused: bob (vision-devs): queue "urgent-retrain" is not open to user bob' in text
    told = "unplaceable: nlp/big: released by policy, Kubernetes cannot place it: 0/4 nodes are available"
    assert told in text
    assert f"no node fits: nlp/giant: never released, holds no quota: {NOWHERE[2]}" in text
    assert any(line.startswith("limits: none exceeded") for line in text)


def test_the_refusal_is_admissions_own_words_out_of_kubectls_error() -> None:
    stderr = ('Error from server (Forbidden): error when creating "STDIN": admission webhook '
              '"pods.sluicegate.dev" denied the request: queue "q" is not open to user bob\n')
    assert denial(stderr) == 'queue "q" is not open to user bob'
    assert denial("connection refused\n") == "connection refused"


def test_the_story_submits_in_time_order_with_unique_names_and_expects_one_refusal() -> None:
    plays = story.story()
    assert [p.at for p in plays] == sorted(p.at for p in plays)
    names = [(p.namespace, n) for p in plays for n in p.names]
    assert len(names) == len(set(names))
    (refused,) = [p for p in plays if p.refused]
    assert refused.objects[0]["metadata"]["labels"][keys.QUEUE_LABEL] == story.URGENT_QUEUE
    assert "ml-oncall" not in refused.user.groups
    # Every pod is managed: it asks for a GPU or names presets (a bare pod would not be).
    for p in plays:
        for obj in p.objects:
            spec = obj["spec"]["template"] if obj["kind"] == "Job" else obj
            annotations = spec["metadata"].get("annotations") or {}
            asks = any("resources" in c for c in spec["spec"]["containers"])
            assert asks or keys.PRESETS_ANNOTATION in annotations, obj["metadata"]["name"]


def test_the_story_has_a_pod_no_node_could_hold_and_one_that_waits_for_a_cordoned_node() -> None:
    """Both kinds of waiting: the giant asks more GPUs than any node of 8 has, so it is never
    released; the fine-tuning pod selects the reserved node, which could hold it but is
    cordoned, so it is released and waits for Kubernetes."""
    pods = {o["metadata"]["name"]: o for p in story.story() for o in p.objects}
    giant, tune = pods[story.GIANT], pods[story.FINETUNE]
    assert story.GIANT_GPUS > 8 >= story.FINETUNE_GPUS
    assert giant["spec"]["containers"][0]["resources"]["limits"][keys.GPU_RESOURCE] == str(story.GIANT_GPUS)
    assert tune["spec"]["nodeSelector"] == dict([story.RESERVED_LABEL])
    assert story.RESERVED_NODE not in story.SPOT_NODES


def test_the_live_view_draws_queues_teams_every_waiting_pod_and_the_story() -> None:
    console = Console(file=io.StringIO(), width=160, force_terminal=False)
    view = LiveView(console)
    view.said(0.5, "alice launches sweep lr-sweep")
    view.update(3.0, board([pod("t1", "sweeps", phase="Running"),
                            pod("t3", "sweeps", gated=True, dispatched=HELD),
                            pod("big", "urgent", gpus=16, team="nlp", dispatched=STUCK)], QUEUES))
    view.close()
    text = console.file.getvalue()
    for shown in ("alice launches sweep lr-sweep", "Queues at 3s", "1/24", "1/16", "nlp", "16",
                  "Waiting pods (2)", "t3", "WorkflowLimit", "workflow ns/w: 4/4 running",
                  "big", "released; unplaceable", "dispatched, waiting for Kubernetes to place it"):
        assert shown in text, shown


def test_the_live_view_fits_an_80_by_24_terminal_and_always_shows_the_reasons() -> None:
    queues = [*QUEUES, queue("training", 10, 8, "16"), queue("batch", 0, 8), queue("interactive", 30, 4)]
    held = [pod(f"lr-sweep-trial-{i:02}", "sweeps", gated=True, namespace="vision-research",
                dispatched=("False", "WorkflowLimit",
                            "workflow vision-research/lr-sweep: 4/4 running, the limit of its queue sweeps"))
            for i in range(12)]
    console = Console(file=io.StringIO(), width=80, height=24, force_terminal=False)
    view = LiveView(console)
    for i in range(10):
        view.said(float(i), f"step {i}: something happens in the story and is said in a long line " * 2)
    view.update(3.0, board([pod("t1", "sweeps", phase="Running"), *held,
                            pod("big", "urgent", gpus=16, team="nlp", dispatched=STUCK)], queues))
    frame = console.render_lines(view._render(), console.options, pad=False)
    view.close()
    text = "\n".join("".join(s.text for s in line) for line in frame)
    assert len(frame) <= 23, text
    assert "Waiting pods (13)" in text
    assert "lr-sweep-trial-00" in text and "WorkflowLimit" in text
    shown = text.count("WorkflowLimit") + text.count("released; unplaceable")
    assert shown >= 3
    assert f"… and {13 - shown} more" in text
    assert "step 9" in text, "the newest story line stays"


def test_the_view_gives_waiting_pods_room_before_the_story() -> None:
    from demo.showing import MIN_STORY_LINES, STORY_LINES, fit
    assert fit(40, 3) == (STORY_LINES, 3)
    assert fit(10, 3) == (7, 3)
    assert fit(10, 20) == (MIN_STORY_LINES, 7)
    assert fit(2, 20) == (MIN_STORY_LINES, 1)
