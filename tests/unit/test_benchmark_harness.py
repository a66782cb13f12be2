"""The benchmark harness's pure parts: scenarios and their floors, the per-kind FlowSchemas, the
run's correctness checks over hand-built records, saved runs and the report."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from audit.checking import Cap, Limits
from audit.loading import Load, Submission, Submitted
from audit.naming import SLUICEGATE
from audit.scraping import webhook_calls
from benchmarks import counting, machine, profiling, reporting, results
from benchmarks import matrix as matrices
from benchmarks.bare import VERSION as BARE_VERSION
from benchmarks.bare import Bare
from benchmarks.results import Percentiles, Run, Usage
from benchmarks.running import Measured, check, run_notes
from benchmarks.scenarios import ALL, BASELINE, Scenario, matrix, select
from benchmarks.sluicegate import releases_account
from benchmarks.systems import Account, Setup, queue_limits
from tests.audit_stories import Story

# --- scenarios ------------------------------------------------------------------------------


def test_the_baseline_is_the_issues_with_its_floor_of_sixty_two_and_a_half_seconds() -> None:
    assert (BASELINE.pods, BASELINE.nodes, BASELINE.gpus_per_node, BASELINE.cap, BASELINE.seconds) == (
        1000, 16, 8, 32, 2.0)
    assert BASELINE.floor_seconds == 62.5
    assert BASELINE.rounds_floor_seconds == 64.0  # 32 rounds of 2 s: the last round runs 8 pods


def test_the_matrix_covers_every_size_and_keeps_each_limit_within_half_the_gpus() -> None:
    cells = matrix()
    assert {(s.pods, s.queues, s.nodes) for s in cells} == {
        (p, q, n) for p in (100, 1000, 5000) for q in (10, 100) for n in (64, 512)}
    assert {(s.queues, s.nodes): s.max_running for s in cells} == {
        (10, 64): 25, (100, 64): 2, (10, 512): 204, (100, 512): 20}
    for s in cells:
        s.check()
        assert s.cap <= s.gpus // 2
    small = select(["p100-q10-n64"])[0]
    assert small.floor_seconds == small.rounds_floor_seconds == 2.0  # limits above the pods: one pod's run


def test_a_scenario_whose_limits_exceed_the_gpus_is_refused() -> None:
    with pytest.raises(ValueError, match="placement, not policy"):
        Scenario(name="x", pods=10, queues=2, nodes=1, max_running=8).check()


def test_scenarios_are_chosen_by_shell_patterns_in_matrix_order_and_unknown_names_are_named() -> None:
    assert [s.name for s in select(["p1000-*-n64"])] == ["p1000-q10-n64", "p1000-q100-n64"]
    assert [s.name for s in select(["baseline", "quick"])] == ["baseline", "quick"]
    with pytest.raises(ValueError, match="no scenario matches p7"):
        select(["p7"])
    assert len({s.name for s in ALL}) == len(ALL) == 13


def test_the_large_cell_is_twenty_thousand_pods_on_a_thousand_nodes_and_chosen_by_name_only() -> None:
    (large,) = select(["p20000-q100-n1000"])
    assert (large.pods, large.queues, large.nodes, large.max_running) == (20000, 100, 1000, 40)
    large.check()  # 4,000 running at most, on 8,000 GPUs
    assert large not in ALL  # make bench does not run Kueue as shipped on it


# --- counting requests by kind --------------------------------------------------------------


def test_each_kind_of_request_has_its_own_flow_schema_tried_in_order_for_the_systems_subjects_only() -> None:
    subjects = [counting.user("kueue")]
    schemas = counting.flow_schemas("kueue", subjects)
    assert [s["metadata"]["name"] for s in schemas] == [
        "bench-kueue-pod-writes", "bench-kueue-pod-status", "bench-kueue-events", "bench-kueue-own-objects",
        "bench-kueue-leases", "bench-kueue-reads", "bench-kueue-other"]
    precedences = [s["spec"]["matchingPrecedence"] for s in schemas]
    assert precedences == sorted(precedences) and max(precedences) < 1000  # before the audit identities'
    assert all(s["spec"]["rules"][0]["subjects"] == subjects for s in schemas)
    assert {s["spec"]["priorityLevelConfiguration"]["name"] for s in schemas} == {"workload-low"}
    catch_all = schemas[-1]["spec"]["rules"][0]
    assert catch_all["resourceRules"][0]["verbs"] == ["*"]
    assert catch_all["nonResourceRules"][0]["verbs"] == ["*"]


def test_a_systems_requests_by_kind_are_read_from_its_own_flow_schemas_only() -> None:
    grew = {"bench-kueue-pod-writes": 1000.0, "bench-kueue-own-objects": 3000.0,
            "bench-sluicegate-pod-writes": 7.0, "service-accounts": 50.0}
    found = counting.by_kind("kueue", grew)
    assert found["pod writes"] == 1000.0 and found["own objects"] == 3000.0
    assert sum(found.values()) == 4000.0


# --- the run's correctness checks -----------------------------------------------------------

class Checked:
    """Just what ``check`` reads of a system."""

    key = "sluicegate"
    naming = SLUICEGATE

    def __init__(self, limits: Limits) -> None:
        self._limits = limits

    def limits(self, setup: Setup) -> Limits:
        return self._limits


SMALL = Scenario(name="small", pods=3, queues=1, nodes=1, max_running=2, teams=1)
LOAD = Load(pods=3, queues=("a",), teams=("t",), run="load-test")
SETUP = Setup(SMALL, LOAD, ("ns",))


def measured(story: Story, *, requests: float = 3.0, names: Sequence[str] = ("p1", "p2", "p3")) -> Measured:
    submitted = Submitted(LOAD, tuple(Submission("ns", n, "a", "t", f"uid-ns-{n}", 0.0) for n in names),
                          (), ("ns",), 0.0, 1.0)
    return Measured(submitted, story.record(), {"pod writes": requests}, requests + 10,
                    {"controller": Usage(1.0, 50.0)}, {}, (1.0, 1.0), ())


def three_pods() -> Story:
    return Story().pod("p1").pod("p2").pod("p3")


def test_a_run_within_its_limits_in_which_every_pod_finished_once_passes() -> None:
    story = three_pods().lifecycle("p1", 1, 3).lifecycle("p2", 1, 3).lifecycle("p3", 3.1, 5)
    assert check(Checked(queue_limits(SETUP)), SETUP, measured(story)) == []


def test_a_release_beyond_a_queues_limit_fails_the_run_naming_the_queue_and_the_limit() -> None:
    story = three_pods().lifecycle("p1", 1, 3).lifecycle("p2", 1, 3).lifecycle("p3", 1.5, 5)
    problems = check(Checked(queue_limits(SETUP)), SETUP, measured(story))
    assert len(problems) == 1
    assert "1 release(s) beyond the configured limits" in problems[0]
    assert "queue a: 3 running > limit 2" in problems[0]


def test_a_lost_pod_a_pod_released_twice_and_a_pod_created_ungated_each_fail_the_run() -> None:
    story = Story().pod("p1").pod("p2").pod("p3", gated=False)
    story.lifecycle("p1", 1, 3).release("p2", 1).regate("p2", 1.5).succeed("p3", 2)
    problems = check(Checked(Limits(cluster=Cap(running=5))), SETUP, measured(story))
    assert any("1 pods never finished, e.g. ns/p2 (gated)" in p for p in problems), problems
    assert any("1 pods released twice, e.g. ns/p2" in p for p in problems), problems
    ungated = "were not created with the gate sluicegate.dev/dispatch, e.g. ns/p3"
    assert any(ungated in p for p in problems), problems


def test_fewer_requests_from_the_system_than_pods_means_it_did_not_release_them_itself() -> None:
    story = three_pods().lifecycle("p1", 1, 3).lifecycle("p2", 1, 3).lifecycle("p3", 3.1, 5)
    problems = check(Checked(queue_limits(SETUP)), SETUP, measured(story, requests=2.0))
    assert problems == ["the API server counted 2 pod writes from sluicegate for 3 pods: it cannot "
                        "have released them itself"]


def test_sluicegates_release_count_must_be_the_pods_exactly_neither_fewer_nor_more() -> None:
    assert releases_account(1000, 1000) == Account()
    fewer, more = releases_account(999, 1000), releases_account(1001, 1000)
    assert fewer.problems == ("Sluicegate's controllers count 999 releases (sluicegate_releases_total) "
                              "for 1000 pods",)
    assert more.problems == ("Sluicegate's controllers count 1001 releases (sluicegate_releases_total) "
                             "for 1000 pods",)


# --- saved runs and the report --------------------------------------------------------------


def a_run(system: str, title: str, drain: float, *, failures: tuple[str, ...] = (),
          processes: Mapping[str, Usage] | None = None, scenario: str = "baseline") -> Run:
    return Run(
        scenario=scenario, system=system, title=title, version="v", pods=1000, queues=1, teams=2, nodes=16,
        gpus_per_node=8, seconds=2.0, max_running=32, cap=32, floor_seconds=62.5, rounds_floor_seconds=64.0,
        started="2026-11-30T12:00:00+00:00", command="python -m benchmarks.matrix --scenario baseline",
        load_average=(1.0, 2.0), failures=failures, drain_seconds=drain, releases_per_second=1000 / drain,
        creation_to_release=Percentiles(1000, 30.0, 55.0, 60.0, 61.0),
        freed_to_release=Percentiles(968, 0.02, 0.2, 0.04, 0.5),
        peak_running=32, peak_queue_running=32, processes=dict(processes or {"p": Usage(3.0, 40.0)}),
        requests=1000.0, requests_by_kind={"pod writes": 1000.0}, requests_all=9000.0,
        machine={"cores": "2"}, versions={"kueue": "v0.17.0"},
    )


def test_a_saved_run_reads_back_equal(tmp_path: Path) -> None:
    run = a_run("kueue", "Kueue", 180.0, processes={"kueue": Usage(55.0, 136.0)})
    results.save(tmp_path, run)
    assert results.load_all(tmp_path) == [run]


def test_the_report_puts_the_systems_side_by_side_with_ratios_to_the_bare_ungater() -> None:
    runs = [a_run("kueue", "Kueue (QPS 50)", 180.0), a_run("bare", "bare ungater", 69.0),
            a_run("sluicegate", "Sluicegate", 80.0, failures=("queue q: 33 running > limit 32",))]
    text = reporting.report(runs)
    header = next(line for line in text.splitlines() if line.startswith("| | "))
    assert header == "| | bare ungater | Sluicegate | Kueue (QPS 50) |"
    drain = next(line for line in text.splitlines() if line.startswith("| drain:"))
    assert "69.0 (1.00×)" in drain and "180 (2.61×)" in drain
    assert "| result | ok | **FAILED** | ok |" in text
    assert "- queue q: 33 running > limit 32" in text
    assert "| baseline | bare, sluicegate, kueue | sluicegate |" in text
    assert "| p5000-q100-n512 | not run | – |" in text


def test_growth_compares_each_figure_across_pod_counts_of_the_same_shape() -> None:
    runs = [a_run("bare", "bare ungater", d, scenario=f"p{p}-q10-n64")
            for p, d in ((100, 10.0), (1000, 80.0))]
    runs = [Run.from_json({**r.to_json(), "pods": p}) for r, p in zip(runs, (100, 1000), strict=True)]
    lines = reporting.growth(runs)
    assert "| bare ungater: drain s | 10.0 | 80.0 | ×8.00 |" in lines


def test_the_hottest_functions_of_a_profile_count_each_sample_once_per_function() -> None:
    folded = "\n".join([
        "main (x.py:1);cycle (c.py:9);sort (s.py:3) 60",
        "main (x.py:1);cycle (c.py:9) 20",
        "main (x.py:1);patch (p.py:5);cycle (c.py:9) 20",
        "garbage",
    ])
    found = {h.function: (h.inclusive, h.own) for h in profiling.hottest(folded)}
    assert found["main (x.py:1)"] == (1.0, 0.0)
    assert found["cycle (c.py:9)"] == (1.0, 0.4)
    assert found["sort (s.py:3)"] == (0.6, 0.6)
    assert profiling.hottest("") == []


def test_repeated_rounds_show_each_systems_median_run_and_every_rounds_drain(tmp_path: Path) -> None:
    runs = [replace(a_run("bare", "bare ungater", d), round=i, load_average=(load, load))
            for i, (d, load) in enumerate(((90.0, 9.0), (70.0, 3.0), (80.0, 5.0)), 1)]
    runs += [replace(a_run("kueue", "Kueue", 200.0), round=1),
             replace(a_run("kueue", "Kueue", 150.0, failures=("queue q: 33 running > limit 32",)), round=2)]
    for run in runs:
        results.save(tmp_path, run)
    assert sorted(p.name for p in (tmp_path / "baseline").iterdir()) == [
        "bare.2.json", "bare.3.json", "bare.json", "kueue.2.json", "kueue.json"]
    assert {s: r.round for s, r in reporting.median_runs(results.load_all(tmp_path)).items()} == {
        "bare": 3, "kueue": 1}
    text = reporting.report(results.load_all(tmp_path))
    assert "| result | ok (3 rounds; median shown) | **FAILED** in 1 of 2 rounds |" in text
    assert "| drain in each round, s (load average at its start) | 90 (9), 70 (3), 80 (5) | " \
           "200 (1), 150 (1) FAILED |" in text
    assert "**Kueue, round 2 FAILED**:" in text
    drain = next(line for line in text.splitlines() if line.startswith("| drain:"))
    assert "80.0 (1.00×)" in drain and "200 (2.50×)" in drain


def test_a_system_that_wrote_no_pods_did_not_release_them_whatever_else_it_sent() -> None:
    # Status writes, events and reads add up to more requests than pods, but releasing a pod
    # is a write to the pod: without one per pod, something else removed the gates.
    story = three_pods().lifecycle("p1", 1, 3).lifecycle("p2", 1, 3).lifecycle("p3", 3.1, 5)
    base = measured(story)
    busy = replace(base, requests={"pod writes": 0.0, "pod status": 3.0, "events": 3.0, "reads": 5.0})
    problems = check(Checked(queue_limits(SETUP)), SETUP, busy)
    assert problems == ["the API server counted 0 pod writes from sluicegate for 3 pods: it cannot "
                        "have released them itself"]


def test_a_run_in_which_no_process_of_the_system_was_measured_fails_rather_than_report_zero_cpu() -> None:
    story = three_pods().lifecycle("p1", 1, 3).lifecycle("p2", 1, 3).lifecycle("p3", 3.1, 5)
    problems = check(Checked(queue_limits(SETUP)), SETUP, replace(measured(story), processes={}))
    assert problems == ["no process of sluicegate was measured: its CPU seconds and memory are unknown"]


def test_the_report_shows_unmeasured_cpu_and_memory_as_missing_not_as_zero() -> None:
    runs = [a_run("bare", "bare ungater", 69.0),
            a_run("sluicegate", "Sluicegate", 80.0, failures=("it crashed",), processes={"x": Usage(0, 0)})]
    runs[1] = replace(runs[1], processes={})
    lines = reporting.report(runs).splitlines()
    cpu = next(line for line in lines if line.startswith("| CPU seconds"))
    rss = next(line for line in lines if line.startswith("| peak RSS"))
    assert cpu.endswith("| 3.0 (1.00×) | – |") and rss.endswith("| p 40 | – |")


def test_each_column_names_the_commit_its_run_was_made_at() -> None:
    bare, mine = a_run("bare", "bare ungater", 69.0), a_run("sluicegate", "Sluicegate", 80.0)
    runs = [replace(bare, versions={**bare.versions, "sluicegate": "aaa111"}),
            replace(mine, versions={**mine.versions, "sluicegate": "bbb222+changes"})]
    assert "| commit of this repository | aaa111 | bbb222+changes |" in reporting.report(runs)


def test_a_pod_in_no_limited_queue_fails_the_run_since_no_limit_was_checked_for_it() -> None:
    # The per-queue limits are looked up by the queue the recorder read from the pod: a pod
    # whose queue label it could not read would be held to no limit at all.
    story = Story().pod("p1").pod("p2", queue="").pod("p3", queue="elsewhere")
    story.lifecycle("p1", 1, 3).lifecycle("p2", 1, 3).lifecycle("p3", 1, 3)
    problems = check(Checked(queue_limits(SETUP)), SETUP, measured(story))
    assert problems == ["2 pods are in no queue the limits name, so no queue limit was checked for "
                        "them, e.g. ns/p2 (queue '')"]


def test_limits_that_cap_nothing_fail_the_run() -> None:
    story = three_pods().lifecycle("p1", 1, 3).lifecycle("p2", 1, 3).lifecycle("p3", 3.1, 5)
    assert check(Checked(Limits()), SETUP, measured(story)) == [
        "the limits checked cap nothing: no release could have gone beyond them"]


def test_a_table_whose_runs_ran_different_loads_under_one_name_says_so() -> None:
    # Runs are kept across invocations; a scenario redefined in between (another limit, more
    # pods) must not sit in one table under the first run's description as if comparable.
    bare, mine = a_run("bare", "bare ungater", 69.0), a_run("sluicegate", "Sluicegate", 80.0)
    text = reporting.report([bare, replace(mine, max_running=16, cap=16)])
    assert "**Not the same load**: bare ungater: 1,000 pods" in text
    assert "at most 16 running per queue" in text
    assert "Not the same load" not in reporting.report([bare, mine])


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


def test_the_commit_is_dirty_for_changed_code_not_for_the_results_the_matrix_writes(tmp_path: Path) -> None:
    (tmp_path / "benchmarks" / "results" / "baseline").mkdir(parents=True)
    files = ("code.py", "benchmarks/RESULTS.md", "benchmarks/results/baseline/bare.json")
    for name in files:
        (tmp_path / name).write_text("1\n")
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", *files)
    git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x")
    clean = machine.commit(tmp_path)
    (tmp_path / "benchmarks" / "RESULTS.md").write_text("2\n")
    (tmp_path / "benchmarks" / "results" / "baseline" / "bare.json").write_text("2\n")
    assert machine.commit(tmp_path) == clean and "+" not in clean
    (tmp_path / "code.py").write_text("2\n")
    assert machine.commit(tmp_path) == clean + "+changes"


def test_a_run_made_at_another_commit_than_its_invocation_started_at_says_so() -> None:
    run = a_run("sluicegate", "Sluicegate", 80.0)
    run = replace(run, versions={**run.versions, "sluicegate": "bbb222"})
    assert matrices.moved(run, "bbb222") == run
    assert matrices.moved(run, "aaa111").notes == (
        "the repository was at aaa111 when this invocation started and at bbb222 for this run: "
        "the runs of one invocation ran different code",)


def test_a_run_whose_recorder_had_to_relist_fails_since_the_gap_could_hide_a_release_beyond_a_limit() -> None:
    # After a relist a pod released and finished while the watch was away shows both at once:
    # for the checks it never ran, so the running set of the gap is unknown.
    story = three_pods().lifecycle("p1", 1, 3).lifecycle("p2", 1, 3).lifecycle("p3", 3.1, 5)
    story.relists = 1
    assert check(Checked(queue_limits(SETUP)), SETUP, measured(story)) == [
        "the recorder's watch had to start over 1 time(s): what was released while it was away "
        "was not seen running, so the limits were not checked throughout"]


def test_the_freed_slot_cell_gives_how_many_slots_it_is_over_and_says_when_none_was_freed() -> None:
    bare = a_run("bare", "bare ungater", 69.0)
    slow = replace(a_run("kueue", "Kueue", 180.0), freed_to_release=Percentiles())
    lines = reporting.report([bare, slow]).splitlines()
    row = next(line for line in lines if line.startswith("| freed slot"))
    assert row.endswith("| 20 / 40 (n=968) | no finish at a full limit while pods waited |")


def test_the_bare_ungater_is_held_to_each_queues_limit_as_well_as_the_total() -> None:
    limits = Bare().limits(SETUP)
    assert limits.queues == queue_limits(SETUP).queues
    assert limits.cluster == Cap(running=SMALL.cap, gpus=SMALL.cap)


def test_the_bare_ungaters_peak_in_one_queue_is_set_against_the_limit_unless_it_knew_no_queues() -> None:
    now = replace(a_run("bare", "bare ungater", 69.0), version=BARE_VERSION, peak_queue_running=30)
    before = replace(now, version="audit.ungating (this repository)", scenario="p100-q10-n64")
    text = reporting.report([now, before])
    rows = [line for line in text.splitlines() if line.startswith("| peak running, one queue")]
    assert rows == ["| peak running, one queue / limit | 30 / 32 |",
                    "| peak running, one queue / limit | 30 (it knew no queues) |"]


def test_a_sampled_run_says_so_beside_its_figures() -> None:
    account = Account(notes=("a note of the system's",))
    assert run_notes(account, profiled=False) == ("a note of the system's",)
    assert run_notes(account, profiled=True) == (
        "a note of the system's", "sampled with py-spy during the load (--profile): its figures carry "
        "the sampling's cost")


def _webhook_lines() -> str:
    family = "apiserver_admission_webhook_admission_duration_seconds"
    lines = [f"# TYPE {family} histogram"]
    for name, rejected, kind, count, seconds in [
        ("pods.mutate.sluicegate.dev", "false", "admit", 40, 0.4),
        ("pods.mutate.sluicegate.dev", "true", "admit", 2, 0.1),
        ("pods.validate.sluicegate.dev", "false", "validating", 30, 0.3),
    ]:
        labels = f'name="{name}",operation="CREATE",rejected="{rejected}",type="{kind}"'
        lines += [f'{family}_bucket{{{labels},le="+Inf"}} {count}',
                  f"{family}_sum{{{labels}}} {seconds}", f"{family}_count{{{labels}}} {count}"]
    return "\n".join(lines) + "\n"


def test_webhook_calls_are_summed_by_webhook_over_operations_and_outcomes() -> None:
    found = webhook_calls(_webhook_lines())
    assert found == {"pods.mutate.sluicegate.dev": (42.0, 0.5), "pods.validate.sluicegate.dev": (30.0, 0.3)}


def test_the_report_gives_each_webhooks_calls_per_pod_and_mean_wait_and_says_when_not_measured() -> None:
    bare = a_run("bare", "bare ungater", 69.0)
    calls = {"pods.mutate.sluicegate.dev": (2000.0, 10.0), "jobs.validate.sluicegate.dev": (3.0, 0.1)}
    mine = replace(a_run("sluicegate", "Sluicegate", 80.0), webhooks=calls)
    row = next(line for line in reporting.report([replace(bare, webhooks={}), mine]).splitlines()
               if line.startswith("| admission webhook calls"))
    # 3 calls in 1,000 pods are left out
    assert row.endswith("| none | pods.mutate.sluicegate.dev 2.00 × 5.0 ms |")
    old = next(line for line in reporting.report([bare, mine]).splitlines() if line.startswith("| admission"))
    assert "| – |" in old
