"""Set the scene and play the story on a running cluster with Sluicegate, through the real kubectl.

Every submission is a ``kubectl create`` impersonating its user and groups (as a person with
that identity would submit), so admission judges each exactly as it would judge them. The
auditor's recorder watches every managed pod from before the first submission; the view follows
them through a watch of its own. The story ends when every pod has finished except the one that
cannot be placed, and that one is reported unplaceable by the gate controller.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from queue import SimpleQueue
from typing import Any, Final

from audit.connection import Credentials
from audit.recording import recording
from audit.records import Record
from controlplane.launching import LocalCluster
from demo import story
from demo.board import board, finished, no_node_fits, unplaceable
from demo.following import following
from demo.showing import View
from demo.summary import Summary, limits, summarize
from policy import keys
from process import kubeyaml

Obj = dict[str, Any]
SAMPLES: Final = Path(__file__).resolve().parents[1] / "manifests" / "samples"
# Upper bounds, not targets: each wait ends as soon as its condition holds.
SCENE_SECONDS: Final = 60.0
STORY_SECONDS: Final = 240.0
TICK: Final = 0.25
DENIED = re.compile(r"denied the request: (.*)$", re.DOTALL)


class DemoError(RuntimeError):
    """The story could not be played; the message says which step and why."""


@dataclass(frozen=True, slots=True)
class Outcome:
    summary: Summary
    record: Record
    refused_by: str
    no_node: dict[str, str]
    """Pod -> why no node could hold it: never released (``NoNodeFits``)."""


def denial(stderr: str) -> str:
    """Admission's own words from kubectl's error output."""
    text = stderr.strip()
    found = DENIED.search(text)
    return (found.group(1) if found else text).strip()


def set_scene(cluster: LocalCluster, clock: Callable[[], float] = time.monotonic) -> None:
    """The spot pool, the reserved node (cordoned), the sample setup, and admission knowing it."""
    for node in story.SPOT_NODES:
        cluster.kubectl("label", "node", node, "=".join(story.SPOT_LABEL), "--overwrite")
    cluster.kubectl("label", "node", story.RESERVED_NODE, "=".join(story.RESERVED_LABEL), "--overwrite")
    cluster.kubectl("cordon", story.RESERVED_NODE)
    cluster.kubectl("apply", "-k", str(SAMPLES))
    probe = kubeyaml.dump(story.notebook(0))
    deadline = clock() + SCENE_SECONDS
    last = ""
    while clock() < deadline:  # admission's cache sees the new Queues and Presets shortly
        result = cluster.kubectl(*story.BOB.impersonation(), "-n", "vision-notebooks", "create",
                                 "--dry-run=server", "-f", "-", input=probe, check=False)
        if result.returncode == 0:
            return
        last = result.stderr.strip()
        time.sleep(0.25)
    raise DemoError(f"admission did not accept a sample notebook within {SCENE_SECONDS:.0f}s: {last}")


class Player:
    def __init__(
        self, cluster: LocalCluster, view: View, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.cluster = cluster
        self.view = view
        self.clock = clock

    def _json(self, *args: str) -> Obj:
        data: Obj = json.loads(self.cluster.kubectl(*args, "-o", "json").stdout)
        return data

    def _submit(self, play: story.Submission, say: Callable[[str], None]) -> str:
        """Submit; the refusal's message for a submission the story expects refused."""
        say(play.says)
        result = self.cluster.kubectl(*play.user.impersonation(), "-n", play.namespace, "create", "-f", "-",
                                      input=kubeyaml.dump_all(play.objects), check=False)
        if play.refused:
            if result.returncode == 0:
                say(f"ADMITTED, though the story expected a refusal: {', '.join(play.names)}")
                return ""
            words = denial(result.stderr)
            say(f"refused: {words}")
            return words
        if result.returncode != 0:
            raise DemoError(f"{play.user.name} could not submit {', '.join(play.names)}: "
                            f"{result.stderr.strip()}")
        return ""

    def play(self) -> Outcome:
        plays = list(story.story())
        expected = sum(len(p.objects) for p in plays if not p.refused)  # a Job makes one pod
        queues = self._json("get", "queues")["items"]
        credentials = Credentials.from_kubeconfig(self.cluster.kubeconfig)
        refused = ""
        refused_by = next(f"{p.user.name} ({', '.join(p.user.groups)}) submitting {', '.join(p.names)}"
                          f" to queue {story.URGENT_QUEUE}" for p in plays if p.refused)
        placed: dict[str, str] = {}
        nowhere: dict[str, str] = {}
        # Submissions run one after another on a thread of their own, so the view keeps
        # showing what happens while a `kubectl create` of 16 trials takes its seconds; what
        # they say comes back through ``notes``, stamped when said, and is shown from here.
        notes: SimpleQueue[tuple[float, str]] = SimpleQueue()
        submitting = ThreadPoolExecutor(1, thread_name_prefix="demo-submit")
        submitted: list[Future[str]] = []
        with recording(credentials, selector=keys.QUEUE_LABEL) as recorder, following(credentials) as pods:
            start = self.clock()

            def elapsed() -> float:
                return self.clock() - start

            def say(line: str) -> None:
                notes.put((elapsed(), line))

            try:
                while True:
                    while plays and plays[0].at <= elapsed():
                        submitted.append(submitting.submit(self._submit, plays.pop(0), say))
                    while not notes.empty():
                        self.view.said(*notes.get())
                    for done in [f for f in submitted if f.done()]:
                        refused = refused or done.result()  # a failed submission raises here
                        submitted.remove(done)
                    seen = pods.all()
                    at = elapsed()  # when this copy of the pods was read: what the lines below show
                    self.view.update(at, board(seen, queues))
                    for pod in seen:
                        meta = pod["metadata"]
                        why = unplaceable(pod)
                        key = f"{meta['namespace']}/{meta['name']}"
                        if why is not None and key not in placed:
                            placed[key] = why
                            self.view.said(at, f"{key} was released by policy, but Kubernetes cannot "
                                               f"place it: {why}")
                        never = no_node_fits(pod)
                        if never is not None and key not in nowhere:
                            nowhere[key] = never
                            self.view.said(at, f"{key} is not released: no node could hold it: {never}")
                    if not plays and not submitted and _over(seen, expected):
                        break
                    if at > STORY_SECONDS:
                        raise DemoError(f"the story did not end within {STORY_SECONDS:.0f}s; "
                                        f"pods still going: {_going(seen)}")
                    time.sleep(TICK)
            finally:
                submitting.shutdown(wait=False, cancel_futures=True)
            while not notes.empty():  # said by the last submission after the last look
                self.view.said(*notes.get())
            until = time.time()
            record = recorder.snapshot()
            seen = pods.all()
        policy = self.cluster.kubectl("get", "policies", keys.POLICY_NAME, "-o", "json", check=False)
        held = limits(queues, self._json("get", "teams")["items"],
                      json.loads(policy.stdout) if policy.returncode == 0 else None, seen)
        summary = summarize(record, held, until=until, refused=refused, unplaceable=placed)
        return Outcome(summary, record, refused_by, nowhere)


def _settled(pod: Obj) -> bool:
    """Finished, or waiting for good: unplaceable, or held because no node could hold it."""
    return finished(pod) or unplaceable(pod) is not None or no_node_fits(pod) is not None


def _over(pods: list[Obj], expected: int) -> bool:
    """Every pod has been created, and each has finished or waits for good (``_settled``)."""
    return len(pods) >= expected and all(_settled(p) for p in pods)


def _going(pods: list[Obj]) -> str:
    names = [f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in pods if not _settled(p)]
    return ", ".join(names) or "none"


def save(outcome: Outcome, directory: Path) -> tuple[Path, Path]:
    """``summary.json`` and the auditor's ``record.json``, for tests and for a look afterwards."""
    directory.mkdir(parents=True, exist_ok=True)
    summary = directory / "summary.json"
    summary.write_text(json.dumps({**outcome.summary.to_json(), "refusedBy": outcome.refused_by,
                                   "noNodeFits": outcome.no_node}, indent=2))
    record = directory / "record.json"
    record.write_text(json.dumps(outcome.record.to_json()))
    return summary, record
