"""One list of what ships (docs/decisions/0034-the-product-and-its-harness.md): pyproject.toml's
``tool.setuptools.packages.find`` names the product; the wheel finds exactly it; mypy and
import-linter check the product and the harness, no more, no less; the Containerfile and
.dockerignore are what ``make containerfile`` writes from the list, and the build context they
make holds the product alone, with every process the manifests run."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import setuptools

from controlplane.checkout import harness_environment
from tests import image
from tests.image import CONTAINERFILE, ROOT, build_context, build_stage, containerfile, dockerignore
from tests.manifest_files import objects

PRODUCT = image.product()
HARNESS = image.harness()


def test_the_product_and_the_harness_are_apart_and_together_every_package_of_the_checkout() -> None:
    assert not set(PRODUCT) & set(HARNESS)
    assert len(set(PRODUCT)) == len(PRODUCT) and len(set(HARNESS)) == len(HARNESS)
    packages = {path.parent.name for path in ROOT.glob("*/__init__.py")} - {"tests"}
    assert packages == set(PRODUCT) | set(HARNESS), "a package of the checkout is neither product nor harness"


def test_the_wheel_finds_exactly_the_products_packages_and_their_subpackages() -> None:
    include = image.pyproject()["tool"]["setuptools"]["packages"]["find"]["include"]
    assert include == [name for package in PRODUCT for name in (package, f"{package}.*")]
    found = setuptools.find_packages(where=str(ROOT), include=include)
    assert {name.split(".")[0] for name in found} == set(PRODUCT)
    assert set(found) == {path.parent.relative_to(ROOT).as_posix().replace("/", ".")
                          for package in PRODUCT for path in (ROOT / package).rglob("__init__.py")}


def test_a_harness_module_runs_as_a_process_from_anywhere_only_given_the_checkout(tmp_path: Path) -> None:
    """The harness is not installed, even in the dev environment: away from the checkout's root,
    ``python -m audit.ungating`` finds it through ``harness_environment`` alone."""
    command = [sys.executable, "-m", "audit.ungating", "--help"]
    bare = {k: v for k, v in harness_environment().items() if k != "PYTHONPATH"}
    alone = subprocess.run(command, cwd=tmp_path, env=bare, capture_output=True, text=True)
    assert alone.returncode != 0 and "No module named 'audit'" in alone.stderr
    given = subprocess.run(command, cwd=tmp_path, env=harness_environment(), capture_output=True, text=True)
    assert given.returncode == 0 and given.stdout.startswith("usage: python -m audit.ungating"), given.stderr


def test_mypy_and_import_linter_check_the_product_and_the_harness() -> None:
    tools = image.pyproject()["tool"]
    both = [*PRODUCT, *HARNESS]
    assert tools["mypy"]["packages"] == both
    assert tools["importlinter"]["root_packages"] == both


def contract(name: str) -> dict[str, Any]:
    contracts = image.pyproject()["tool"]["importlinter"]["contracts"]
    (found,) = [c for c in contracts if c["name"].startswith(name)]
    return found


def test_the_contracts_over_the_product_hold_every_package_of_it() -> None:
    apart = contract("the product imports nothing from the harness")
    assert apart["source_modules"] == list(PRODUCT)
    assert set(HARNESS) <= set(apart["forbidden_modules"])
    layers = contract("the product's packages are layers")["layers"]
    assert sorted(name.strip() for layer in layers for name in re.split("[|:]", layer)) == sorted(PRODUCT)
    assert contract("no import circle inside a package of the product")["ancestors"] == list(PRODUCT)


def test_the_checked_in_containerfile_and_dockerignore_are_what_make_containerfile_writes() -> None:
    assert CONTAINERFILE.read_text() == containerfile(PRODUCT), "run `make containerfile`"
    assert (ROOT / ".dockerignore").read_text() == dockerignore(PRODUCT), "run `make containerfile`"
    assert not (ROOT / ".containerignore").exists(), "podman would read it instead of .dockerignore"


def test_the_containerfiles_build_context_is_the_product_and_what_its_wheel_reads(tmp_path: Path) -> None:
    workdir = build_context(CONTAINERFILE, tmp_path)
    assert workdir == tmp_path / "src"
    assert {p.name for p in workdir.iterdir()} == {"pyproject.toml", "README.md", *PRODUCT}
    for package in PRODUCT:
        sources = {p.relative_to(ROOT) for p in (ROOT / package).rglob("*")
                   if p.is_file() and "__pycache__" not in p.parts}
        assert {p.relative_to(workdir) for p in (workdir / package).rglob("*") if p.is_file()} == sources
    assert (workdir / "pyproject.toml").read_bytes() == (ROOT / "pyproject.toml").read_bytes()


def test_the_manifests_run_only_modules_of_the_product() -> None:
    commands = [container["command"] for obj in objects("default")
                if obj["kind"] in ("Deployment", "StatefulSet")
                for container in obj["spec"]["template"]["spec"]["containers"]]
    assert sorted(commands) == [["python", "-m", m] for m in ("controller", "recorder", "webhook")]
    assert {command[2] for command in commands} <= set(PRODUCT)
    described = re.findall(r"^#   python -m (\w+)", CONTAINERFILE.read_text(), re.MULTILINE)
    assert sorted(described) == ["controller", "recorder", "webhook"]


# --- reading a Containerfile as podman and docker read it ------------------------------------

OLD = """\
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY policy/ policy/
COPY extender/ extender/
RUN pip wheel --wheel-dir /wheels .

FROM python:3.11-slim
COPY --from=build /wheels /tmp/wheels
COPY manifests/ /manifests/
"""


def test_the_build_stage_is_its_workdir_and_its_copies_from_the_context_only() -> None:
    stage = build_stage(OLD)
    assert stage.workdir == "/src"
    assert stage.copies == ((("pyproject.toml", "README.md"), "/src/"),
                            (("policy/",), "/src/policy/"), (("extender/",), "/src/extender/"))


def test_a_context_without_a_package_the_processes_import_is_told_apart(tmp_path: Path) -> None:
    """The Containerfile before this list: no process/ nor recorder/ in the context, so the
    image's servers could not start."""
    old = tmp_path / "Containerfile"
    old.write_text(OLD)
    workdir = build_context(old, tmp_path / "stage")
    assert {p.name for p in workdir.iterdir()} == {"pyproject.toml", "README.md", "policy", "extender"}
    assert not {"process", "recorder", "controller"} & {p.name for p in workdir.iterdir()}


@pytest.mark.parametrize(("path", "excluded"), [
    ("policy/admitting.py", False),
    ("README.md", False),
    ("policy/__pycache__/admitting.cpython-311.pyc", True),
    ("tests/unit/test_packaging.py", True),
    ("controlplane/kwok.yaml", True),
    (".venv/bin/python", True),
    (".git/HEAD", True),
])
def test_the_dockerignore_keeps_the_product_and_leaves_out_everything_else(path: str, excluded: bool) -> None:
    patterns = [image._pattern(line) for line in dockerignore(PRODUCT).splitlines()
                if line and not line.startswith("#")]
    assert image._excluded(path, patterns) is excluded


def test_copying_what_the_context_leaves_out_fails_naming_it(tmp_path: Path) -> None:
    context = tmp_path / "context"
    (context / "benchmarks").mkdir(parents=True)
    (context / "benchmarks" / "__init__.py").write_text("")
    (context / ".dockerignore").write_text("benchmarks/\n")
    copying = tmp_path / "Containerfile"
    copying.write_text("FROM python:3.11-slim\nWORKDIR /src\nCOPY benchmarks/ benchmarks/\n")
    with pytest.raises(FileNotFoundError, match="copies benchmarks/, which is not in the build context"):
        build_context(copying, tmp_path / "stage", source=context)


def test_copying_the_whole_context_copies_what_the_ignore_file_keeps(tmp_path: Path) -> None:
    context = tmp_path / "context"
    for path in ("policy/__init__.py", "policy/__pycache__/keys.pyc", "tests/test_x.py", "README.md"):
        (context / path).parent.mkdir(parents=True, exist_ok=True)
        (context / path).write_text("")
    (context / ".dockerignore").write_text("tests/\n**/__pycache__/\n")
    whole = tmp_path / "Containerfile"
    whole.write_text("FROM python:3.11-slim\nWORKDIR /src\nCOPY . .\n")
    workdir = build_context(whole, tmp_path / "stage", source=context)
    assert sorted(p.relative_to(workdir).as_posix() for p in workdir.rglob("*") if p.is_file()) == [
        ".dockerignore", "README.md", "policy/__init__.py"]
