"""``make demo MONITORING=1``, non-interactively (stdout is a pipe, so plain lines), to the end,
on a cluster directory of its own: the story goes as told, by what it prints, by what the
cluster shows afterwards, and by the auditor's record checked here against the limits the
cluster holds; it ends with the alerts a real Prometheus holds active then. Without
``MONITORING`` the demo only leaves Prometheus out."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from audit.checking import Cap, Limits, lost, peaks, violations
from audit.records import Record
from demo.summary import runs
from policy import keys
from policy.quantities import parse

ROOT = Path(__file__).resolve().parents[2]
UNPLACEABLE = "dispatched, waiting for Kubernetes to place it: "
# An upper bound for the whole run (cluster start, Sluicegate, the story), not a target.
DEMO_SECONDS = 600


def _cap(obj: dict[str, Any]) -> Cap:
    spec = obj.get("spec") or {}
    quota = (spec.get("quota") or {}).get(keys.GPU_RESOURCE)
    return Cap(running=spec.get("maxRunning"), gpus=None if quota is None else parse(quota) // 1000)


def test_make_demo_plays_the_story_to_the_end_and_its_summary_holds(tmp_path: Path) -> None:
    root = tmp_path / "demo-cluster"

    def kubectl(*args: str) -> dict[str, Any]:
        out = subprocess.run([str(root / "bin" / "kubectl"), f"--kubeconfig={root / 'kubeconfig'}", *args,
                              "-o", "json"], capture_output=True, text=True, timeout=120, check=True)
        data: dict[str, Any] = json.loads(out.stdout)
        return data

    try:
        make = ["make", "--no-print-directory", "demo", f"CLUSTER_DIR={root}", "MONITORING=1"]
        demo = subprocess.run(make, cwd=ROOT,
                              capture_output=True, text=True, timeout=DEMO_SECONDS, stdin=subprocess.DEVNULL)
        out = demo.stdout
        assert demo.returncode == 0, f"{out}\n{demo.stderr}"
        lines = out.splitlines()
        assert lines[-1] == f"export KUBECONFIG={root.resolve() / 'kubeconfig'}"
        assert f"make down CLUSTER_DIR={root}" in out
        assert "Summary, from the auditor's own record of every pod:" in out
        row = r"^  (?P<queue>[a-z-]+)\s+(?P<pods>\d+)\s+(?P<released>\d+)\s+(?P<waiting>\d+)\s"
        rows = {m["queue"]: m for m in re.finditer(row, out, re.MULTILINE)}
        assert {q: int(rows[q]["pods"]) for q in ("sweeps", "notebooks", "urgent-retrain", "nlp-train")} == {
            "sweeps": 16, "notebooks": 5, "urgent-retrain": 1, "nlp-train": 2}

        summary = json.loads((root / "demo" / "summary.json").read_text())
        # The urgent Job went first: it waited less than the sweep's trials, and trials that
        # were waiting when it arrived were released after it.
        assert summary["urgentWaitSeconds"] is not None
        assert summary["urgentWaitSeconds"] < summary["trialWaits"]["mean"]
        assert summary["overtaken"] >= 1
        # The refusal, with admission's message, printed; and the pod does not exist.
        refusal = 'queue "urgent-retrain" is not open to user bob (team vision)'
        assert refusal in summary["refused"]
        assert re.search(r"^\[\s*[\d.]+s\] refused: " + re.escape(refusal), out, re.MULTILINE), out
        pods = kubectl("get", "pods", "-n", "vision-research")["items"]
        assert "bob-urgent" not in {p["metadata"]["name"] for p in pods}
        # The pod no node could hold: never released, shown as such, holding none of nlp's quota.
        nowhere = "needs 16 nvidia.com/gpu on one node; the largest node of the cluster has 8"
        assert f"no node fits: nlp-research/llm-pretrain: never released, holds no quota: {nowhere}" in out
        assert summary["noNodeFits"] == {"nlp-research/llm-pretrain": nowhere}
        giant = kubectl("get", "pod", "llm-pretrain", "-n", "nlp-research")
        assert [g["name"] for g in giant["spec"].get("schedulingGates") or []] == [keys.GATE]
        condition = next(c for c in giant["status"]["conditions"] if c["type"] == keys.CONDITION)
        told = (condition["status"], condition["reason"], condition["message"])
        assert told == ("False", "NoNodeFits", nowhere)
        # The pod for the cordoned node: released, shown unplaceable, and so it stands.
        assert "unplaceable: nlp-research/llm-finetune: released by policy, Kubernetes cannot place it: " \
               "0/4 nodes are available" in out
        tune = kubectl("get", "pod", "llm-finetune", "-n", "nlp-research")
        assert not tune["spec"].get("schedulingGates") and not tune["spec"].get("nodeName")
        condition = next(c for c in tune["status"]["conditions"] if c["type"] == keys.CONDITION)
        assert condition["status"] == "True" and condition["message"].startswith(UNPLACEABLE)
        # The alerts then, as shipped: the unplaceable pod's and the never-placeable pod's are
        # pending (their for: is 15 minutes), nothing fires.
        alerts = out[out.index("alerts active now in Prometheus"):out.index("The cluster stays up")]
        for alert, stuck in (("SluicegateDispatchedButUnplaceable", tune),
                             ("SluicegateWorkCanNeverRun", giant)):
            queue = stuck["metadata"]["labels"][keys.QUEUE_LABEL]
            # the labels in name order: the never-placeable one's also say its reason and team
            assert re.search(rf"^  {alert} pending since [\d:]+ UTC queue={queue} (reason=\w+ )?"
                             rf"severity=warning( team=[\w-]+)?: ", alerts, re.MULTILINE), alerts
        assert " firing " not in alerts, alerts
        nlp = next(t for t in kubectl("get", "teams")["items"] if t["metadata"]["name"] == "nlp")
        assert nlp["status"]["display"]["gpus"] == "8/16"  # the fine-tuning pod's alone

        # No limit exceeded, by the auditor's record, against the limits the cluster holds (the
        # workflow's as admission wrote it on the trials), not by the demo's own figures.
        record = Record.from_json(json.loads((root / "demo" / "record.json").read_text()))
        trials = [p for p in pods if p["metadata"]["labels"].get(keys.WORKFLOW_LABEL) == "lr-sweep"]
        workflow_limit = {int(p["metadata"]["annotations"][keys.WORKFLOW_MAX_RUNNING_ANNOTATION])
                          for p in trials}
        assert len(trials) == 16 and workflow_limit == {4}
        limits = Limits(
            cluster=_cap(kubectl("get", "policies", keys.POLICY_NAME)),
            queues={q["metadata"]["name"]: _cap(q) for q in kubectl("get", "queues")["items"]},
            teams={t["metadata"]["name"]: _cap(t) for t in kubectl("get", "teams")["items"]},
            workflows={"vision-research/lr-sweep": Cap(running=4)},
        )
        assert violations(record, limits) == []
        assert peaks(record).workflows["vision-research/lr-sweep"].running == 4, "the sweep met its limit"
        # The story ends once every pod is released; trials may still run then (a slower machine),
        # which is not lost. Only the pod Kubernetes cannot place, and the one never released,
        # stay unfinished for good.
        unfinished = sorted(str(p) for p in lost(record) if not str(p).endswith("(running)"))
        assert unfinished == ["nlp-research/llm-finetune (ungated)", "nlp-research/llm-pretrain (created)"]
        assert summary["violations"] == []

        # GPU-hours are hours pods held GPUs on a node: each pod released and never placed has
        # none, and the time it held its queue's quota is shown apart, as quota-hours.
        assert summary["unplaceable"], "the story has a pod released that Kubernetes cannot place"
        ran = runs(record)
        queues = {q["queue"]: q for q in summary["queues"]}
        assert "unplaced quota-hours" in out
        for key in summary["unplaceable"]:
            never = next(r for r in ran if r.key == key)
            assert never.released is not None and never.bound is None
            line = queues[never.queue]
            assert line["quota_hours"] > 0
            if not any(r.bound is not None for r in ran if r.queue == never.queue):
                assert line["gpu_hours"] == 0, line
    finally:
        subprocess.run([sys.executable, "-m", "controlplane", "--root", str(root), "down"],
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
