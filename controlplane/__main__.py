"""``python -m controlplane {build,up,down,status}``: the local control plane from a shell.

``up --sluicegate`` (``make up``) also runs Sluicegate on it; ``down`` stops both.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from controlplane import building, deploying
from controlplane.deploying import LocalSluicegate
from controlplane.launching import Layout, LocalCluster, StartError, log_tail, stop

DEFAULT_ROOT = Path(os.environ.get("SLUICEGATE_CLUSTER_DIR", ".cluster"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m controlplane", description=__doc__)
    parser.add_argument(
        "--root", type=Path, default=DEFAULT_ROOT, help="cluster directory (default: %(default)s)"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("build", help="build the binaries into the cache, if missing")
    up = sub.add_parser("up", help="start an empty cluster (stopping one already in --root)")
    up.add_argument("--nodes", type=int, default=4, help="fake GPU nodes (default: %(default)s)")
    up.add_argument("--gpus", type=int, default=8, help="nvidia.com/gpu per node (default: %(default)s)")
    up.add_argument("--keep-state", action="store_true",
                    help="keep the objects of the last run (etcd's data) instead of starting empty")
    up.add_argument("--sluicegate", action="store_true",
                    help="also install manifests/local and run Sluicegate's processes against it")
    sub.add_parser("down", help="stop Sluicegate's processes and the cluster in --root")
    sub.add_parser("status", help="say whether a cluster runs in --root")
    args = parser.parse_args(argv)

    if args.command == "build":
        started = time.monotonic()
        try:
            out = building.ensure_binaries()
        except building.BuildError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        print(f"binaries ready in {out} ({time.monotonic() - started:.0f}s)")
        return 0
    if args.command == "up":
        if args.nodes < 1 or args.gpus < 0:
            parser.error("--nodes must be at least 1 and --gpus at least 0")
        cluster = LocalCluster(args.root, nodes=args.nodes, gpus_per_node=args.gpus,
                               keep_state=args.keep_state)
        sluicegate = LocalSluicegate(cluster) if args.sluicegate else None
        try:
            deploying.stop(args.root)  # Sluicegate's processes of an earlier run go first
            if sluicegate is not None:  # kube-scheduler starts knowing where the extender will be
                cluster.extender = sluicegate.scheduler_extender()
            cluster.up()
            if sluicegate is not None:
                sluicegate.up(progress=_stderr)
        except (StartError, building.BuildError, RuntimeError) as e:
            print(f"error: {e}", file=sys.stderr)
            stop(args.root)
            return 1
        print(f"kubectl of the same release: {cluster.layout.bin / 'kubectl'}", file=sys.stderr)
        if args.sluicegate:
            print(f"logs: {cluster.layout.logs}; stop everything with 'make down'", file=sys.stderr)
        print(f"export KUBECONFIG={cluster.kubeconfig}")
        return 0
    if args.command == "down":
        stopped = [*deploying.stop(args.root), *stop(args.root)]
        print(f"stopped {', '.join(stopped)}" if stopped else f"no cluster runs in {args.root}")
        return 0
    layout = Layout(args.root.resolve())
    if not layout.state.exists():
        print(f"no cluster runs in {args.root}")
        return 1
    state = json.loads(layout.state.read_text())
    print(f"server {state['server']}, kubeconfig {state['kubeconfig']}")
    for name, pid in state["pids"].items():
        print(f"  {name}: pid {pid}, log {layout.log(name)}")
    for name, running in deploying.status(args.root).items():
        log = layout.log(f"sluicegate-{name}")
        if running:
            print(f"  sluicegate {name}: running, log {log}")
        else:
            print(f"  sluicegate {name}: NOT RUNNING; last lines of {log}:\n{log_tail(log)}")
    return 0


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
