"""The image's smoke test, where no container engine runs: the wheel built from exactly the
build context the Containerfile's first stage holds, installed in a fresh virtual environment
without the dev extras, runs the webhook, the gate controller and the recorder against a local
control plane from a directory outside the checkout, each until it is ready, as ``make up``
runs them. Nothing comes from the source tree: the modules load from the new environment's
site-packages, and neither the harness nor the dev extras are there at all."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from controlplane.deploying import LocalSluicegate
from controlplane.launching import LocalCluster
from controlplane.services import CONTROLLER, RECORDER, WEBHOOK
from tests.image import CONTAINERFILE, ROOT, build_context, harness, product

SERVICES = (WEBHOOK, CONTROLLER, RECORDER)
DEV = ("pytest", "rich", "matplotlib")
"""Modules of the dev extras (and the charts extra in them), which the product runs without."""
INSTALL_SECONDS = 600  # a bound for pip, not a target: dependencies come from the index (or pip's cache)


def run(*command: str | Path, cwd: Path, env: dict[str, str]) -> str:
    done = subprocess.run([str(part) for part in command], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=INSTALL_SECONDS, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, f"{' '.join(map(str, command))} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def clean_environment() -> dict[str, str]:
    """This process's environment without what points Python elsewhere (``PYTHONPATH``, an
    active virtual environment): as bare as the image's."""
    return {key: value for key, value in os.environ.items()
            if not key.startswith("PYTHON") and key not in ("VIRTUAL_ENV", "PIP_REQUIRE_VIRTUALENV")}


def install(tmp_path: Path, venv: Path, elsewhere: Path, env: dict[str, str]) -> Path:
    """Build the wheel from the Containerfile's build context and install it, with its
    dependencies alone, into a new virtual environment ``venv``; return the wheel."""
    context = build_context(CONTAINERFILE, tmp_path / "stage")
    pip = (sys.executable, "-m", "pip")  # this environment's pip; it installs into the new one
    run(*pip, "wheel", "--no-deps", "--wheel-dir", tmp_path / "wheels", context, cwd=elsewhere, env=env)
    (wheel,) = (tmp_path / "wheels").glob("sluicegate-*.whl")
    run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=elsewhere, env=env)
    # Its dependencies from the index, through pip's cache; no bytecode compiled ahead (kubernetes-
    # asyncio's thousands of modules would take a minute), the processes compile what they import.
    run(*pip, "--python", venv / "bin" / "python", "install", "--no-compile", wheel, cwd=elsewhere, env=env)
    return wheel


def test_the_wheel_of_the_images_build_context_runs_the_webhook_the_controller_and_the_recorder(
    tmp_path: Path,
) -> None:
    started = time.monotonic()
    elsewhere = tmp_path / "elsewhere"  # the processes' working directory, outside the checkout
    elsewhere.mkdir()
    assert not elsewhere.resolve().is_relative_to(ROOT)
    env = {**clean_environment(), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    venv = tmp_path / "venv"
    python = venv / "bin" / "python"

    cluster = LocalCluster(tmp_path / "cluster", nodes=1, gpus_per_node=1)
    sluicegate = LocalSluicegate(cluster, services=SERVICES, python=str(python), workdir=elsewhere,
                                 environment=env)
    cluster.extender = sluicegate.scheduler_extender()
    with ThreadPoolExecutor(1) as pool:  # pip works while the control plane starts
        installing = pool.submit(install, tmp_path, venv, elsewhere, env)
        cluster.up(progress=lambda line: None)
    try:
        wheel = installing.result()
        sluicegate.up()  # starts each process and waits until its /readyz answers 200
        for service in SERVICES:
            url = f"http://127.0.0.1:{sluicegate.port(service.name, 'metrics')}/readyz"
            with urllib.request.urlopen(url, timeout=10) as answer:
                assert answer.status == 200, f"{service.name} is not ready"
            process = Path(f"/proc/{sluicegate.pid(service.name)}")
            command = (process / "cmdline").read_bytes().split(b"\0")
            assert command[:3] == [str(python).encode(), b"-m", service.module.encode()]
            assert (process / "cwd").resolve() == elsewhere.resolve()
            assert b"PYTHONPATH=" not in (process / "environ").read_bytes()
            # Its compiled dependencies (aiohttp's, multidict's...) are the new environment's.
            mapped = {line.split()[-1] for line in (process / "maps").read_text().splitlines()
                      if line.split()[-1].endswith(".so")}
            assert any(path.startswith(str(venv)) for path in mapped), service.name
            assert not [path for path in mapped if path.startswith(str(ROOT))], service.name
    finally:
        sluicegate.down()
        cluster.down()

    # The same interpreter, directory and environment find each module of the product in the
    # new environment's site-packages, and no module of the harness at all.
    where = run(python, "-c", "import importlib.util, sys\n"
                "for name in sys.argv[1:]:\n"
                "    spec = importlib.util.find_spec(name)\n"
                "    print(name, spec.origin if spec else None)",
                *product(), *harness(), *DEV, cwd=elsewhere, env=env)
    found = dict(line.split(" ", 1) for line in where.splitlines())
    site = run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])",
               cwd=elsewhere, env=env).strip()
    assert Path(site).is_relative_to(venv)
    for name in product():
        assert Path(found[name]) == Path(site) / name / "__init__.py", found[name]
    assert {name: found[name] for name in (*harness(), *DEV)} == {name: "None" for name in (*harness(), *DEV)}
    # The wheel holds the product and its metadata, nothing else.
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")} == set(product())
    print(f"image smoke test: {time.monotonic() - started:.0f}s")
