"""How many admission workers a container gets: its CPU limit, read from the cgroup."""

from __future__ import annotations

from pathlib import Path

import pytest

from process.cpus import cpu_limit
from webhook.settings import parse
from webhook.workers import worker_argv


def cgroup(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


@pytest.mark.parametrize(
    ("files", "cpus", "expected"),
    [
        pytest.param({"cpu.max": "200000 100000\n"}, 16, 2, id="a limit of 2 CPUs on a large node"),
        pytest.param({"cpu.max": "150000 100000\n"}, 16, 2, id="1.5 CPUs is rounded up"),
        pytest.param({"cpu.max": "50000 100000\n"}, 16, 1, id="half a CPU is one worker"),
        pytest.param({"cpu.max": "800000 100000\n"}, 2, 2, id="never more than the CPUs it may run on"),
        pytest.param({"cpu.max": "max 100000\n"}, 6, 6, id="no limit: the CPUs it may run on"),
        pytest.param({}, 3, 3, id="no cgroup files at all"),
        pytest.param({"cpu/cpu.cfs_quota_us": "300000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 8, 3,
                     id="cgroup v1's quota"),
        pytest.param({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, 8, 8,
                     id="cgroup v1 without a quota"),
        pytest.param({"cpu.max": "garbage"}, 4, 4, id="a file that does not read is no limit"),
    ],
)
def test_the_cpu_limit_is_the_cgroups_quota_rounded_up_within_the_cpus(
    tmp_path: Path, files: dict[str, str], cpus: int, expected: int
) -> None:
    assert cpu_limit(cgroup(tmp_path, files), lambda: cpus) == expected


def test_workers_are_set_by_flag_or_variable_and_sized_from_the_cpus_by_default() -> None:
    assert parse([], {}).workers == 0
    assert parse(["--workers", "3"], {}).workers == 3
    assert parse([], {"SLUICEGATE_WORKERS": "4"}).workers == 4
    with pytest.raises(SystemExit):
        parse(["--workers", "-1"], {})


def test_a_worker_gets_the_supervisors_flags_its_number_and_its_share_of_connections() -> None:
    argv = worker_argv(["--port", "8443", "--max-connections", "512"], 2, 256)
    settings = parse(argv, {})
    assert (settings.port, settings.worker, settings.max_connections) == (8443, 2, 256)
