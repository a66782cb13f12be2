"""``python -m controlplane {build,build-kueue,build-helm,build-prometheus,build-operators,up,down,status}``:
the local control plane.

``up --sluicegate`` (``make up``) also runs Sluicegate on it, and ``--monitoring``
(``make up MONITORING=1``) a Prometheus scraping it with the alerts loaded; ``down`` stops all.
"""

from __future__ import annotations

import os
import signal
import sys


def _interrupted_early(signum: int, frame: object) -> None:
    """Ctrl-C while the imports below load (seconds on a busy machine): nothing has changed yet."""
    print("\ninterrupted before anything started; nothing was changed.", file=sys.stderr, flush=True)
    os._exit(130)


signal.signal(signal.SIGINT, _interrupted_early)

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path

from controlplane import building, deploying, monitoring, processes
from controlplane.deploying import LocalSluicegate
from controlplane.launching import LocalCluster, StartError
from controlplane.monitoring import LocalPrometheus, PrometheusError
from controlplane.processes import Layout, log_tail, stop

DEFAULT_ROOT = Path(os.environ.get("SLUICEGATE_CLUSTER_DIR", ".cluster"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m controlplane", description=__doc__)
    parser.add_argument(
        "--root", type=Path, default=DEFAULT_ROOT, help="cluster directory (default: %(default)s)"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("build", help="build the binaries into the cache, if missing")
    sub.add_parser("build-kueue", help="build Kueue (the benchmarks' peer) into its own cache, if missing")
    sub.add_parser("build-helm", help="build helm (the chart's tests use it) into its own cache, if missing")
    sub.add_parser("build-prometheus",
                   help="build prometheus and promtool (alert tests, MONITORING=1), if missing")
    sub.add_parser("build-operators",
                   help="build the training-operator and KubeRay (the operator e2e tests), if missing")
    up = sub.add_parser("up", help="start an empty cluster (stopping one already in --root)")
    up.add_argument("--nodes", type=int, default=4, help="fake GPU nodes (default: %(default)s)")
    up.add_argument("--gpus", type=int, default=8, help="nvidia.com/gpu per node (default: %(default)s)")
    up.add_argument("--keep-state", action="store_true",
                    help="keep the objects of the last run (etcd's data) instead of starting empty")
    up.add_argument("--sluicegate", action="store_true",
                    help="also install manifests/local and run Sluicegate's processes against it")
    up.add_argument("--monitoring", action="store_true",
                    help="with --sluicegate: also run Prometheus scraping Sluicegate, with its alerts loaded")
    sub.add_parser("down", help="stop Sluicegate's processes and the cluster in --root")
    sub.add_parser("status", help="say whether a cluster runs in --root")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGINT, signal.default_int_handler)

    if args.command == "build":
        return _build(building.ensure_binaries, "binaries ready in")
    if args.command == "build-kueue":
        return _build(building.ensure_kueue, "kueue ready at")
    if args.command == "build-helm":
        return _build(building.ensure_helm, "helm ready at")
    if args.command == "build-prometheus":
        return _build(building.ensure_prometheus, "prometheus and promtool ready in")
    if args.command == "build-operators":
        return _build(building.ensure_operators, "training-operator and kuberay-operator ready at")
    if args.command == "up":
        if args.nodes < 1 or args.gpus < 0:
            parser.error("--nodes must be at least 1 and --gpus at least 0")
        if args.monitoring and not args.sluicegate:
            parser.error("--monitoring scrapes Sluicegate: give --sluicegate too")
        down = deploying.make_command("down", args.root)
        prometheus: LocalPrometheus | None = None
        try:
            cluster = LocalCluster(args.root, nodes=args.nodes, gpus_per_node=args.gpus,
                                   keep_state=args.keep_state)  # picks the ports: NoFreePort
            sluicegate = LocalSluicegate(cluster) if args.sluicegate else None
            _say_replacing(args.root, args.keep_state)
            deploying.stop(args.root)  # Sluicegate's processes of an earlier run go first
            if sluicegate is not None:  # kube-scheduler starts knowing where the extender will be
                cluster.extender = sluicegate.scheduler_extender()
            cluster.up()
            if sluicegate is not None:
                sluicegate.up(progress=_stderr)
                if args.monitoring:
                    prometheus = LocalPrometheus(sluicegate)
                    prometheus.up(progress=_stderr)
        except (StartError, building.BuildError, PrometheusError, RuntimeError) as e:
            print(f"error: {e}", file=sys.stderr)
            deploying.stop_everything(args.root)
            return 1
        except KeyboardInterrupt:
            deploying.stop_everything(args.root)
            print(f"\ninterrupted while starting; stopped what had started, nothing runs in {args.root}; "
                  f"start again with '{deploying.make_command('up', args.root)}'.", file=sys.stderr)
            return 130
        print(f"kubectl of the same release: {cluster.layout.bin / 'kubectl'}", file=sys.stderr)
        if prometheus is not None:
            print(f"prometheus: {prometheus.url} (alerts: {prometheus.url}/api/v1/alerts)", file=sys.stderr)
        if args.sluicegate:
            print(f"logs: {cluster.layout.logs}; stop everything with '{down}'", file=sys.stderr)
        print(f"export KUBECONFIG={cluster.kubeconfig}")
        return 0
    if args.command == "down":
        stopped = [*deploying.stop(args.root), *stop(args.root)]
        print(f"stopped {', '.join(stopped)}" if stopped else f"no cluster runs in {args.root}")
        return 0
    return _status(args.root)


def _build(ensure: Callable[[], Path | tuple[Path, ...]], ready: str) -> int:
    """Build what ``ensure`` builds, if missing; say where it is and how long it took."""
    started = time.monotonic()
    try:
        out = ensure()
    except building.BuildError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    where = ", ".join(str(path) for path in out) if isinstance(out, tuple) else str(out)
    print(f"{ready} {where} ({time.monotonic() - started:.0f}s)")
    return 0


def _status(root: Path) -> int:
    """What runs in ``root``: each component and process with its pid or ports, and the end of
    the log of any that died. Exit status 1 when anything recorded is not running."""
    layout = Layout(root.resolve())
    if not layout.state.exists():
        print(f"no cluster runs in {root}")
        return 1
    state = json.loads(layout.state.read_text())
    print(f"server {state['server']}, kubeconfig {state['kubeconfig']}")
    dead: list[str] = []
    for name, running in processes.status(root).items():
        pid, log = state["pids"][name], layout.log(name)
        if running:
            print(f"  {name}: running, pid {pid}, log {log}")
        else:
            dead.append(name)
            print(f"  {name}: NOT RUNNING (pid {pid} is gone); last lines of {log}:\n{log_tail(log)}")
    ports = deploying.ports(root)
    for name, running in deploying.status(root).items():
        log = layout.log(f"sluicegate-{name}")
        where = ", ".join(f"{port} port {number}" for port, number in ports.get(name, {}).items())
        if running:
            print(f"  sluicegate {name}: running, {where}, log {log}")
        else:
            dead.append(f"sluicegate {name}")
            print(f"  sluicegate {name}: NOT RUNNING ({where}); last lines of {log}:\n{log_tail(log)}")
    if processes.status(root).get(monitoring.NAME) and (url := monitoring.address(root)) is not None:
        print(f"  prometheus serves {url}: alerts at {url}/api/v1/alerts")
    if dead:
        print(f"not running: {', '.join(dead)}; stop the rest with '{deploying.make_command('down', root)}' "
              f"and start again with '{deploying.make_command('up', root)}'")
        return 1
    return 0


def _say_replacing(root: Path, keep_state: bool) -> None:
    """Say so before a cluster already running in ``root`` is stopped and replaced."""
    if not any(processes.status(root).values()):
        return
    wiped = ("its objects are kept (--keep-state)" if keep_state else
             "every object in it (namespaces, queues, pods) is wiped; its logs move to "
             f"{root}/logs.previous")
    print(f"a cluster runs in {root}: stopping it to start a new one; {wiped}", file=sys.stderr, flush=True)


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
