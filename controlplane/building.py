"""Build the control plane binaries once, into a cache keyed by their versions.

The versions live in the Go modules under ``controlplane/go``; the cache key is made of them,
the Go toolchain's version and a digest of the module files, so a second run (and CI on the
same machine) rebuilds nothing, and a change of any pin builds into a fresh directory.

Kueue, the benchmarks' peer, and helm, which the chart's tests drive, are built the same way,
each from its own module (``go/kueue``, ``go/helm``) into its own cache directory
(``ensure_kueue``, ``ensure_helm``): only the tests that use them need them, and their pins must
not change the control plane's cache key.

Prometheus and promtool (``go/prometheus``), which the alert rule tests and the monitoring e2e
use, are built likewise into a cache of their own (``ensure_prometheus``), without the UI assets
and with every optional service discovery left out (``remove_all_sd``): Sluicegate's scrape uses
static targets only, and the cloud SDKs those discoveries import would double the build.

The operators whose workloads the e2e tests submit, the Kubeflow training-operator (PyTorchJob)
and KubeRay's ray-operator (RayCluster, RayJob), are built each from its own module
(``go/training-operator``, ``go/kuberay``: their Kubernetes libraries are years apart) into a
cache directory of its own (``ensure_training_operator``, ``ensure_kuberay``,
``ensure_operators`` for both); ``operator_source`` finds a module's manifests (CRDs, RBAC) in
the Go module cache.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

GO_ROOT = Path(__file__).resolve().parent / "go"
# How often a long build says it is still going.
TICK_SECONDS = 30.0
# Part of the cache key: bump it when the way binaries are built (flags, targets) changes, so
# caches built the old way are not reused.
RECIPE = 1
# The module directories whose files make up the control plane's digest; Kueue's module has a
# digest of its own.
CONTROL_PLANE_MODULES = ("etcd", "kubernetes", "kwok")
KUEUE_MODULE = "kueue"
# Kueue's own recipe number, in its cache key only: bump it when the way Kueue is built changes.
KUEUE_RECIPE = 1
KUEUE_PACKAGE = "sigs.k8s.io/kueue"
HELM_MODULE = "helm"
# helm's own recipe number, in its cache key only: bump it when the way helm is built changes.
HELM_RECIPE = 1
HELM_PACKAGE = "helm.sh/helm/v3"
PROMETHEUS_MODULE = "prometheus"
PROMETHEUS_PACKAGE = "github.com/prometheus/prometheus"
TRAINING_OPERATOR_MODULE = "training-operator"
TRAINING_OPERATOR_PACKAGE = "github.com/kubeflow/training-operator"
KUBERAY_MODULE = "kuberay"
KUBERAY_PACKAGE = "github.com/ray-project/kuberay/ray-operator"
# The operators' own recipe number, in their cache keys only: bump it when the way they are
# built changes.
OPERATORS_RECIPE = 1
# Prometheus's recipe number, in its cache key only: bump it when the way it is built changes.
PROMETHEUS_RECIPE = 1
# Without ``builtinassets`` the web UI is left out (the HTTP API stays); ``remove_all_sd`` keeps
# only the static, file and HTTP service discoveries. Both are part of the cache key.
PROMETHEUS_TAGS = ("remove_all_sd",)

Progress = Callable[[str], None]


class BuildError(RuntimeError):
    """A binary could not be built; the message names it and ends with the compiler's output."""


@dataclass(frozen=True, slots=True)
class Target:
    """One binary: the Go module it is built in, the package, and extra linker flags."""

    name: str
    module: str
    package: str
    ldflags: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Versions:
    kubernetes: str
    etcd: str
    kwok: str
    go: str

    @property
    def key(self) -> str:
        return f"k8s-{self.kubernetes}_etcd-{self.etcd}_kwok-{self.kwok}_{self.go}"


def _required_version(module_dir: str, module: str) -> str:
    text = (GO_ROOT / module_dir / "go.mod").read_text()
    match = re.search(rf"^\s*(?:require\s+)?{re.escape(module)}\s+(v\S+)", text, re.MULTILINE)
    if match is None:
        raise BuildError(f"{module} is not required in controlplane/go/{module_dir}/go.mod")
    return match.group(1)


def go_version() -> str:
    if shutil.which("go") is None:
        raise BuildError("the Go toolchain is not on PATH: install Go 1.26 to build the control plane")
    out = subprocess.run(["go", "env", "GOVERSION"], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def versions() -> Versions:
    return Versions(
        kubernetes=_required_version("kubernetes", "k8s.io/kubernetes"),
        etcd=_required_version("etcd", "go.etcd.io/etcd/server/v3"),
        kwok=_required_version("kwok", "sigs.k8s.io/kwok"),
        go=go_version(),
    )


def kueue_version() -> str:
    return _required_version(KUEUE_MODULE, KUEUE_PACKAGE)


def prometheus_version() -> str:
    return _required_version(PROMETHEUS_MODULE, PROMETHEUS_PACKAGE)


def _modules_digest(modules: tuple[str, ...] = CONTROL_PLANE_MODULES, recipe: int = RECIPE) -> str:
    digest = hashlib.sha256(f"recipe {recipe}".encode())
    for path in sorted(GO_ROOT.rglob("*")):
        relative = path.relative_to(GO_ROOT)
        if relative.parts[0] in modules and path.is_file() and path.suffix in {".mod", ".sum", ".go"}:
            digest.update(relative.as_posix().encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def cache_root() -> Path:
    """``$SLUICEGATE_CACHE``, else ``$XDG_CACHE_HOME/sluicegate``, else ``~/.cache/sluicegate``."""
    if explicit := os.environ.get("SLUICEGATE_CACHE"):
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME")
    return (Path(base) if base else Path.home() / ".cache") / "sluicegate"


def bin_dir(v: Versions | None = None) -> Path:
    v = v or versions()
    return cache_root() / "controlplane" / f"{v.key}_{_modules_digest()}" / "bin"


def kueue_bin_dir() -> Path:
    key = f"kueue-{kueue_version()}_{go_version()}_{_modules_digest((KUEUE_MODULE,), KUEUE_RECIPE)}"
    return cache_root() / "kueue" / key / "bin"


def helm_version() -> str:
    return _required_version(HELM_MODULE, HELM_PACKAGE)


def helm_bin_dir() -> Path:
    key = f"helm-{helm_version()}_{go_version()}_{_modules_digest((HELM_MODULE,), HELM_RECIPE)}"
    return cache_root() / "helm" / key / "bin"


def prometheus_bin_dir() -> Path:
    tags = "+".join(PROMETHEUS_TAGS) or "default"
    digest = _modules_digest((PROMETHEUS_MODULE,), PROMETHEUS_RECIPE)
    key = f"prometheus-{prometheus_version()}_{tags}_{go_version()}_{digest}"
    return cache_root() / "prometheus" / key / "bin"


def _version_ldflags(version: str) -> tuple[str, ...]:
    major, minor = version.lstrip("v").split(".")[:2]
    flags = []
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [
            f"-X {pkg}.gitVersion={version}",
            f"-X {pkg}.gitMajor={major}",
            f"-X {pkg}.gitMinor={minor}",
            f"-X {pkg}.gitTreeState=clean",
            f"-X {pkg}.buildDate=1970-01-01T00:00:00Z",
        ]
    return tuple(flags)


def targets(v: Versions) -> tuple[Target, ...]:
    k8s = _version_ldflags(v.kubernetes)
    return (
        Target("etcd", "etcd", "."),
        Target("kube-apiserver", "kubernetes", "k8s.io/kubernetes/cmd/kube-apiserver", k8s),
        Target("kube-controller-manager", "kubernetes", "k8s.io/kubernetes/cmd/kube-controller-manager", k8s),
        Target("kube-scheduler", "kubernetes", "k8s.io/kubernetes/cmd/kube-scheduler", k8s),
        Target("kubectl", "kubernetes", "k8s.io/kubernetes/cmd/kubectl", k8s),
        Target("kwok", "kwok", "sigs.k8s.io/kwok/cmd/kwok"),
    )


def ensure_binaries(progress: Progress | None = None) -> Path:
    """Return the directory holding every binary, building the missing ones first."""
    say = progress or (lambda line: print(line, file=sys.stderr, flush=True))
    v = versions()
    out = bin_dir(v)
    out.mkdir(parents=True, exist_ok=True)
    with _exclusive(out / ".lock", say):
        todo = [t for t in targets(v) if not (out / t.name).exists()]
        for index, target in enumerate(todo, start=1):
            say(f"building {target.name} ({index}/{len(todo)}) into {out} ...")
            started = time.monotonic()
            _build(target, out, say)
            say(f"built {target.name} in {time.monotonic() - started:.0f}s")
    return out


def kueue_target() -> Target:
    version = kueue_version()
    # Kueue reports this version in its log and its user agent (kueue/v0.17.0 ...).
    flags = (f"-X {KUEUE_PACKAGE}/pkg/version.GitVersion={version}",
             f"-X {KUEUE_PACKAGE}/pkg/version.BuildDate=1970-01-01T00:00:00Z")
    return Target("kueue", KUEUE_MODULE, f"{KUEUE_PACKAGE}/cmd/kueue", flags)


def ensure_kueue(progress: Progress | None = None) -> Path:
    """Return the path of the kueue binary, building it first when the cache lacks it."""
    return _ensure_one(kueue_target(), kueue_version(), kueue_bin_dir(), progress)


def helm_target() -> Target:
    version = helm_version()
    # As helm's own Makefile: the version it reports, and the Kubernetes version its lint and
    # template assume (one minor above its client-go's v0.x, i.e. 1.x).
    minor = _required_version(HELM_MODULE, "k8s.io/client-go").lstrip("v").split(".")[1]
    flags = (f"-X {HELM_PACKAGE}/internal/version.version={version}",
             f"-X {HELM_PACKAGE}/internal/version.gitTreeState=clean",
             f"-X {HELM_PACKAGE}/pkg/lint/rules.k8sVersionMajor=1",
             f"-X {HELM_PACKAGE}/pkg/lint/rules.k8sVersionMinor={minor}",
             f"-X {HELM_PACKAGE}/pkg/chartutil.k8sVersionMajor=1",
             f"-X {HELM_PACKAGE}/pkg/chartutil.k8sVersionMinor={minor}")
    return Target("helm", HELM_MODULE, f"{HELM_PACKAGE}/cmd/helm", flags)


def ensure_helm(progress: Progress | None = None) -> Path:
    """Return the path of the helm binary, building it first when the cache lacks it."""
    return _ensure_one(helm_target(), helm_version(), helm_bin_dir(), progress)


def _ensure_one(target: Target, version: str, out: Path, progress: Progress | None) -> Path:
    """Build one binary built apart from the control plane into ``out``, unless it is there."""
    say = progress or (lambda line: print(line, file=sys.stderr, flush=True))
    out.mkdir(parents=True, exist_ok=True)
    with _exclusive(out / ".lock", say):
        if not (out / target.name).exists():
            say(f"building {target.name} {version} into {out} ...")
            started = time.monotonic()
            _build(target, out, say)
            say(f"built {target.name} in {time.monotonic() - started:.0f}s")
    return out / target.name


def prometheus_targets() -> tuple[Target, ...]:
    # The module v0.316.0 is Prometheus 3.16.0: both binaries report it in --version.
    release = "3." + ".".join(str(int(part)) for part in _release_parts(prometheus_version()))
    flags = (f"-X github.com/prometheus/common/version.Version={release}",
             "-X github.com/prometheus/common/version.Revision=" + prometheus_version(),
             "-X github.com/prometheus/common/version.Branch=HEAD",
             "-X github.com/prometheus/common/version.BuildDate=19700101-00:00:00")
    return tuple(
        Target(name, PROMETHEUS_MODULE, f"{PROMETHEUS_PACKAGE}/cmd/{name}", flags, PROMETHEUS_TAGS)
        for name in ("prometheus", "promtool")
    )


def _release_parts(module_version: str) -> tuple[str, str]:
    """``v0.316.0`` → ("16", "0"): Prometheus tags its Go module v0.<3 and minor>.<patch>."""
    match = re.fullmatch(r"v0\.3(\d{2})\.(\d+)", module_version)
    if match is None:
        raise BuildError(f"{PROMETHEUS_PACKAGE} {module_version} is not a Prometheus 3 module version")
    return match.group(1), match.group(2)


def ensure_prometheus(progress: Progress | None = None) -> Path:
    """Return the directory holding prometheus and promtool, building the missing ones first."""
    say = progress or (lambda line: print(line, file=sys.stderr, flush=True))
    out = prometheus_bin_dir()
    out.mkdir(parents=True, exist_ok=True)
    with _exclusive(out / ".lock", say):
        todo = [t for t in prometheus_targets() if not (out / t.name).exists()]
        for index, target in enumerate(todo, start=1):
            say(f"building {target.name} {prometheus_version()} ({index}/{len(todo)}) into {out} ...")
            started = time.monotonic()
            _build(target, out, say)
            say(f"built {target.name} in {time.monotonic() - started:.0f}s")
    return out


def kueue_source() -> Path:
    """Kueue's module source in the Go module cache (its CRDs, webhooks and RBAC), fetched if absent."""
    return _module_source(KUEUE_MODULE, KUEUE_PACKAGE)


@dataclass(frozen=True, slots=True)
class Operator:
    """One operator built apart: its wrapper module, its Go module, and the binary's name and package."""

    module: str  # the directory under ``controlplane/go``
    package: str  # the operator's Go module
    binary: str
    main: str  # the main package, inside ``package``

    @property
    def version(self) -> str:
        return _required_version(self.module, self.package)

    def bin_dir(self) -> Path:
        digest = _modules_digest((self.module,), OPERATORS_RECIPE)
        return cache_root() / self.module / f"{self.module}-{self.version}_{go_version()}_{digest}" / "bin"

    def target(self) -> Target:
        return Target(self.binary, self.module, self.main)


TRAINING_OPERATOR = Operator(TRAINING_OPERATOR_MODULE, TRAINING_OPERATOR_PACKAGE, "training-operator",
                             f"{TRAINING_OPERATOR_PACKAGE}/cmd/training-operator.v1")
# KubeRay's main package is its module's root.
KUBERAY = Operator(KUBERAY_MODULE, KUBERAY_PACKAGE, "kuberay-operator", KUBERAY_PACKAGE)
OPERATORS = (TRAINING_OPERATOR, KUBERAY)


def ensure_operator(operator: Operator, progress: Progress | None = None) -> Path:
    """Return the path of ``operator``'s binary, building it first when the cache lacks it."""
    return _ensure_one(operator.target(), operator.version, operator.bin_dir(), progress)


def ensure_training_operator(progress: Progress | None = None) -> Path:
    return ensure_operator(TRAINING_OPERATOR, progress)


def ensure_kuberay(progress: Progress | None = None) -> Path:
    return ensure_operator(KUBERAY, progress)


def ensure_operators(progress: Progress | None = None) -> tuple[Path, ...]:
    """Both operators' binaries, one after the other (``make builds`` runs them beside the rest)."""
    return tuple(ensure_operator(operator, progress) for operator in OPERATORS)


def operator_source(operator: Operator) -> Path:
    """The operator's module source in the Go module cache (its CRDs and RBAC), fetched if absent."""
    return _module_source(operator.module, operator.package)


def _module_source(module_dir: str, package: str) -> Path:
    go_version()  # a missing toolchain is reported plainly
    cmd = ["go", "mod", "download", "-json", f"{package}@{_required_version(module_dir, package)}"]
    env = dict(os.environ, GOFLAGS="-mod=readonly")
    result = subprocess.run(cmd, cwd=GO_ROOT / module_dir, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise BuildError(f"go mod download {package} failed: {result.stderr.strip()}")
    return Path(json.loads(result.stdout)["Dir"])


@contextlib.contextmanager
def _exclusive(lock: Path, say: Progress) -> Iterator[None]:
    """Hold the cache directory's lock, so two builds at once (two test runs) build each binary once."""
    with lock.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f"another build holds {lock}; waiting for it to finish ...")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _build(target: Target, out: Path, say: Progress) -> None:
    partial = out / f".{target.name}.partial"
    env = dict(os.environ, CGO_ENABLED="0", GOFLAGS="-mod=readonly -buildvcs=false")
    cmd = ["go", "build", "-trimpath", "-o", str(partial)]
    if target.ldflags:
        cmd.append("-ldflags=" + " ".join(target.ldflags))
    if target.tags:
        cmd.append("-tags=" + ",".join(target.tags))
    cmd.append(target.package)
    started = time.monotonic()
    with tempfile.TemporaryFile() as output:
        proc = subprocess.Popen(cmd, cwd=GO_ROOT / target.module, env=env, stdout=output, stderr=output)
        while proc.poll() is None:
            try:
                proc.wait(timeout=TICK_SECONDS)
            except subprocess.TimeoutExpired:
                say(f"  still building {target.name} ({time.monotonic() - started:.0f}s so far)")
        if proc.returncode != 0:
            output.seek(0)
            tail = "\n".join(output.read().decode(errors="replace").splitlines()[-30:])
            raise BuildError(f"building {target.name} failed (go build exited {proc.returncode}):\n{tail}")
    partial.rename(out / target.name)
