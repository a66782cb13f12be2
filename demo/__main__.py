"""``python -m demo`` (``make demo``): start a local control plane with four fake 8-GPU nodes,
run Sluicegate on it as ``make up`` does, apply manifests/samples and play the seed story
(demo/story.py) while a live view shows queues, GPU use and why each pod waits; end with a
summary per queue and leave the cluster up to explore.

The live view needs a terminal; with ``--plain``, ``SLUICEGATE_DEMO_PLAIN=1`` or when stdout is
not a terminal (CI, a log file), the demo prints plain lines instead. With ``--monitoring``
(``make demo MONITORING=1``) a Prometheus scrapes Sluicegate with its alerts loaded as shipped,
and the demo ends with the alerts active at that moment, one line each. Exit status: 0 when the
story went as told (urgent work first, no limit exceeded, the refusal and the unplaceable pod
shown), 2 when it did not, 1 when the cluster or the story could not run.
"""

from __future__ import annotations

import os
import signal
import sys


def _interrupted_early(signum: int, frame: object) -> None:
    """Ctrl-C while the imports below load (seconds on a busy machine): nothing has changed yet."""
    print("\ninterrupted before the demo started; nothing was changed.", file=sys.stderr, flush=True)
    os._exit(130)


signal.signal(signal.SIGINT, _interrupted_early)

import argparse
import time
from pathlib import Path

from audit.background import BackgroundError
from audit.recording import RecordingError
from controlplane import building, deploying, monitoring, processes
from controlplane.deploying import LocalSluicegate
from controlplane.launching import LocalCluster, StartError
from controlplane.monitoring import LocalPrometheus, PrometheusError
from demo import story
from demo.following import FollowError
from demo.playing import DemoError, Outcome, Player, save, set_scene
from demo.showing import LiveView, PlainView, View, summary_lines

DEFAULT_ROOT = Path(".cluster")
NODES, GPUS = 4, 8  # the story is told for this cluster (demo/story.py)
PLAIN_ENV = "SLUICEGATE_DEMO_PLAIN"


def _plain(flag: bool) -> bool:
    return flag or os.environ.get(PLAIN_ENV, "") not in ("", "0") or not sys.stdout.isatty()


def _say(line: str) -> None:
    print(line, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path,
                        default=Path(os.environ.get("SLUICEGATE_CLUSTER_DIR", DEFAULT_ROOT)),
                        help="cluster directory (default: %(default)s)")
    parser.add_argument("--plain", action="store_true",
                        help=f"plain lines instead of the live view (also {PLAIN_ENV}=1, "
                             "or when stdout is not a terminal)")
    parser.add_argument("--monitoring", action="store_true",
                        help="also run Prometheus scraping Sluicegate; end with the alerts active then")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    root: Path = args.root
    down = deploying.make_command("down", root)
    again = deploying.make_command("demo", root)

    cluster = LocalCluster(root, nodes=NODES, gpus_per_node=GPUS)
    sluicegate = LocalSluicegate(cluster)
    prometheus = LocalPrometheus(sluicegate) if args.monitoring else None
    try:
        running = [name for name, up in processes.status(root).items() if up]
        if running:
            _say(f"demo: a cluster runs in {root} ({', '.join(running)}): stopping it to start a fresh "
                 "one; every object in it (namespaces, queues, pods) is wiped; its logs move to "
                 f"{root}/logs.previous")
        deploying.stop(root)  # Sluicegate's processes of an earlier run go first
        cluster.extender = sluicegate.scheduler_extender()
        cluster.up(progress=_say)
        sluicegate.up(progress=_say)
        if prometheus is not None:
            prometheus.up(progress=_say)
    except (StartError, building.BuildError, PrometheusError, RuntimeError) as e:
        print(f"error: {e}", file=sys.stderr)
        deploying.stop_everything(root)
        return 1
    except KeyboardInterrupt:
        deploying.stop_everything(root)
        print(f"\ninterrupted while starting; stopped what had started, nothing runs in {root}; "
              f"start again with '{again}'.", file=sys.stderr)
        return 130

    kept = (f"interrupted; the cluster and Sluicegate keep running: 'export KUBECONFIG={cluster.kubeconfig}' "
            f"to explore it, '{down}' to stop it.")
    try:
        _say("demo: applying manifests/samples (teams vision and nlp, six queues, five presets) "
             f"and labelling {', '.join(story.SPOT_NODES)} {'='.join(story.SPOT_LABEL)}")
        set_scene(cluster)
        view: View = PlainView(sys.stdout) if _plain(args.plain) else LiveView()
        try:
            outcome = Player(cluster, view).play()
        finally:
            view.close()
    except (DemoError, RuntimeError, RecordingError, FollowError, BackgroundError) as e:
        print(f"error: {e}", file=sys.stderr)
        print(f"The cluster keeps running for a look (logs in {cluster.layout.logs}); stop it with '{down}'.",
              file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"\n{kept}", file=sys.stderr)
        return 130
    try:
        return _finish(outcome, root, cluster, down, prometheus)
    except KeyboardInterrupt:
        print(f"\n{kept}", file=sys.stderr)
        return 130


def _finish(outcome: Outcome, root: Path, cluster: LocalCluster, down: str,
            prometheus: LocalPrometheus | None) -> int:
    for line in summary_lines(outcome.summary, outcome.refused_by, outcome.no_node):
        _say(line)
    if prometheus is not None:
        _say(f"alerts active now in Prometheus ({prometheus.url}), with the rules as shipped:")
        try:
            prometheus.evaluated_after(time.time() + 1)  # judged on what the story left
            active = monitoring.active_lines(prometheus.alerts())
        except PrometheusError as e:
            active = [f"could not read them: {e}"]
        for line in active or ["none"]:
            _say(f"  {line}")
    summary_file, record_file = save(outcome, root / "demo")
    _say(f"figures: {summary_file}; the auditor's record: {record_file}")
    _say("The cluster stays up. Explore it with kubectl of the same release, for example:")
    _say(f"  export PATH={cluster.layout.bin}:$PATH")
    _say("  kubectl get queues")
    _say("  kubectl -n nlp-research describe pod llm-pretrain")
    _say(f"Stop everything with '{down}'.")
    _say(f"export KUBECONFIG={cluster.kubeconfig}")
    s = outcome.summary
    told = not s.violations and s.refused and s.unplaceable and s.urgent_first
    if not told:
        print("error: the story did not go as told (see the summary above)", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
