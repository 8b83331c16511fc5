"""The benchmarks run at CI size and report sane figures. No timing is asserted: speed is
measured by running them, and the figures go into notes, never into tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hub import native
from tests.support.postgres import fresh_database

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def run_bench(script: str, *args: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, str(ROOT / "bench" / script), "--quick", "--json",
                           *args], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_e2e_bench_places_every_task_on_ten_clusters_and_says_where_the_time_went() -> None:
    """With a backlog nothing can run waiting throughout (``--backlog``): the hub parks it
    before the burst, and every phase still ends once its own tasks run."""
    result = run_bench("e2e_bench.py", "--backlog", "300")
    assert result["clusters"] == 10 and result["backlog"] == 300
    assert result["backlog_parked_s"] >= result["backlog_stored_s"] >= 0
    assert result["baseline_grpc_echo_per_s"] > 0 and result["baseline_stored_per_s"] > 0
    for phase in (result["burst"], result["half_load"]):
        assert phase["placements_per_s"] > 0 and phase["running_per_s"] > 0
        assert 0 < phase["submit_to_running_p50_ms"] <= phase["submit_to_running_p99_ms"]
        stages = phase["stages"]
        assert set(stages) == {"store", "queue", "decide", "commit", "send", "member",
                               "report", "apply"}
        assert all(s["tasks"] > 0 and s["mean_ms"] >= 0 for s in stages.values())
        # what the rest of the machine spent meanwhile: the members run on the same cores
        other = phase["other_cpu_ms_per_task"]
        assert other["agents"] > 0 and other["members"] > 0 and other["bench"] > 0
        assert 0 < other["machine_busy"] <= 1
        # the hub's event-loop thread on its own, a part of the process's total
        hub = phase["hub_cpu_ms_per_task"]
        assert 0 < hub["main"] <= hub["total"]
        counts = phase["counts_per_task"]   # every task decided at least once, in a cycle
        assert counts["decisions"] >= 1 and 0 < counts["cycles"] <= counts["decisions"]
        assert counts["task messages"] >= 1   # each task reported at least once (Running)
    assert 0 < result["burst"]["stages"]["queue"]["tasks"] <= result["burst"]["tasks"]


def test_placement_bench_runs_with_its_baseline() -> None:
    result = run_bench("placement_bench.py")
    assert result["decisions"] > 0 and result["placed"] > 0
    assert result["indexed_cached"]["decisions_per_s"] > 0
    steady = result["indexed_cached_steady"]   # all but the first decision of each shape
    assert steady["decisions"] == result["decisions"] - result["request_shapes"] > 0
    assert result["baseline_naive_scan"]["decisions_per_s"] > 0
    assert result["disagreements_with_uncached"] == 0
    assert result["disagreements_with_baseline"] == 0
    assert result["baseline_numpy_scan"]["decisions"] == result["decisions"]
    assert result["disagreements_with_numpy"] == 0 and result["engine_vs_numpy"] > 0
    assert result["engine"] == str(native.STATE)


def test_placement_bench_checks_the_engines_python_source_as_well() -> None:
    """With FUYAO_PURE=1 the bench's engine is the source (what a plain install runs), and
    its decisions agree with every baseline as the compiled engine's do."""
    env = {**os.environ, "FUYAO_PURE": "1"}
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "placement_bench.py"),
                           "--quick", "--json"], capture_output=True, text=True, timeout=600,
                          cwd=ROOT, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["engine"] == "Python source (FUYAO_PURE is set)"
    assert result["disagreements_with_uncached"] == result["disagreements_with_numpy"] == 0


def test_placement_bench_runs_the_hubs_default_order_checked_against_uncached() -> None:
    result = run_bench("placement_bench.py", "--model-choice", "least-overqualified",
                       "--gc", "hub")
    assert result["model_choice"] == "least-overqualified" and result["gc"] == "hub"
    assert not result["baselines_checked"]     # the baselines implement tightest only
    assert result["decisions"] > 0 and result["disagreements_with_uncached"] == 0
    assert result["disagreements_with_baseline"] == result["disagreements_with_numpy"] == 0


def test_memory_bench_reports_the_fleet_and_its_reports_apart() -> None:
    result = run_bench("memory_bench.py")
    assert result["nodes"] == 2000 == result["clusters"] * result["nodes_per_cluster"]
    assert result["peak_rss_mib"] >= result["rss_after_fleet_mib"] > result["rss_base_mib"]
    assert result["report_bytes_per_node"] > 0 and result["hub_bytes_per_node"] > 0
    assert result["fleet_build_s"] > 0 and result["reports_build_s"] > 0
    assert result["decisions"] == 50
    assert result["wire_decode_us_per_node"] > 0 and not result["from_wire"]
    assert result["fleet_build_gc_cpu_s"] >= 0 and result["fleet_build_cpu_us_per_node"] > 0


def test_memory_bench_times_a_sample_and_the_planning_copy_when_asked() -> None:
    timed = run_bench("memory_bench.py", "--planning")["planning"]
    assert set(timed) == {"sample", "copy_stepwise", "copy_at_once"}
    for runs in timed.values():
        assert len(runs) == 2
        assert all(r["longest_stall_ms"] > 0 and r["cpu_s"] >= 0 for r in runs)


def test_memory_bench_times_the_planning_answers_beside_timed_decisions() -> None:
    """--answers after --quick's 50 decisions: its placed tasks must not clash with them."""
    result = run_bench("memory_bench.py", "--answers", "--answer-tasks", "20",
                       "--answer-rounds", "1")
    assert result["answer_tasks"] == 20 and result["decisions"] == 50
    timed = result["answers"]
    assert set(timed) == {"report", "n-1", "fit", "control"}
    for runs in timed.values():
        assert len(runs) == 1 and runs[0]["cpu_s"] >= 0 and runs[0]["digest"]


@pytest.mark.parametrize("flag", [("--answer-tasks", "-1"), ("--answer-rounds", "0"),
                                  ("--answer-rounds", "1000")])
def test_memory_bench_refuses_out_of_range_answer_flags(flag: tuple[str, str]) -> None:
    assert_refused("memory_bench.py", flag)


@pytest.mark.parametrize("devices", ["columns", "messages"])
def test_memory_bench_ingests_from_the_wire_when_asked(devices: str) -> None:
    result = run_bench("memory_bench.py", "--from-wire", "--wire-devices", devices)
    assert result["from_wire"] and result["nodes"] == 2000
    assert result["hub_bytes_per_node"] > 0 and result["fleet_build_s"] > 0
    assert result["wire_devices"] == devices and result["wire_encode_us_per_node"] > 0
    assert result["wire_bytes_per_node"] > 0


TRACES = Path(os.environ.get("FUYAO_TRACES") or ROOT.parent / "shared" / "traces")


@pytest.mark.skipif(not (TRACES / "alibaba-gpu-v2023").exists(),
                    reason="the shared traces are not beside the repository (CI has them)")
def test_trace_quality_bench_reports_federation_against_the_fgd_single_pool() -> None:
    result = run_bench("trace_quality.py")
    assert {"BestFit", "FGD"} <= set(result["fgd_single_pool"])
    assert sorted(r["clusters"] for r in result["runs"]) == [1, 4, 4]   # K=1; K=4 two choices
    for run in result["runs"]:
        assert 0 < run["alloc_pct"]["50"] <= run["alloc_pct"]["100"] <= 100
        assert run["member_unfit"] == 0 and run["member_chose_other_model"] == 0


def assert_refused(script: str, flag: tuple[str, str]) -> None:
    """The bench exits 2 with the flag named, before starting anything."""
    done = subprocess.run([sys.executable, str(ROOT / "bench" / script), *flag],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 2, done.stderr
    assert f"{flag[0]} must be from" in done.stderr


@pytest.mark.parametrize("flag", [("--ready-timeout", "-1"), ("--clusters", "0"),
                                  ("--rate", "nan"), ("--batch", "100000"),
                                  ("--backlog", "-5")])
def test_e2e_bench_refuses_out_of_range_flags_before_starting_anything(
        flag: tuple[str, str]) -> None:
    assert_refused("e2e_bench.py", flag)


def test_cycle_bench_re_places_every_failed_over_task_and_says_where_the_cpu_went() -> None:
    result = run_bench("cycle_bench.py")
    assert result["scenario"] == "failover"
    [run] = result["runs"]
    assert run["placed"] == run["tasks"] == run["active_after"] == 200
    assert run["slices"] >= 1 and run["cpu_s"] > 0 and run["loop_cpu_ms_per_task"] > 0
    assert result["collector"] == "hub" and run["gc_s"] >= 0 and run["gc_full"] >= 0
    profile = result["profile"]
    assert {"engine", "queueing", "staging"} <= set(profile["parts"])
    assert 0.99 <= sum(profile["parts"].values()) <= 1.01
    assert profile["pieces"]["schedule"] > 0 and profile["pieces"]["stage"] > 0
    # the re-queue of the lost cluster's tasks before the cycle, timed and profiled
    assert run["requeue_wall_s"] > 0 and run["requeue_cpu_s"] >= run["requeue_loop_cpu_s"] > 0
    requeue = result["requeue_profile"]
    assert requeue["profiled_s"] > 0
    assert any("requeue_many" in row["func"] for row in requeue["top_self"])


def test_cycle_bench_fails_over_tasks_that_were_reported_running() -> None:
    """--scenario failover-running: the lost tasks had been reported Running (no hub holds
    left), as a live outage's are; every one is re-placed on the survivor."""
    result = run_bench("cycle_bench.py", "--scenario", "failover-running")
    [run] = result["runs"]
    assert result["scenario"] == "failover-running"
    assert run["placed"] == run["tasks"] == run["active_after"] == 200
    assert run["requeue_wall_s"] > 0 and run["clusters_used"] == 1


def test_failover_bench_re_places_a_lost_members_running_tasks_with_the_loop_running() -> None:
    """The monitor's failover and the placement loop together: every Running task of the
    lost c0 ends Placed on c1, timed from the eviction to the last commit."""
    result = run_bench("failover_bench.py")
    [run] = result["runs"]
    assert run["tasks"] == run["moved"] == 200
    assert 0 <= run["evicted_s"] <= run["wall_s"] and run["wall_s"] > 0
    assert run["evicted_s"] < run["staged_s"] <= run["wall_s"]   # decided after, durable later
    assert run["cpu_s"] >= run["loop_cpu_s"] > 0
    assert run["cpu_per_wall"] > 0
    assert result["engine"] == str(native.STATE)


@pytest.mark.parametrize("flag", [("--tasks", "0"), ("--nodes", "0"), ("--repeat", "0"),
                                  ("--tasks", "100000")])
def test_failover_bench_refuses_out_of_range_flags(flag: tuple[str, str]) -> None:
    assert_refused("failover_bench.py", flag)


def test_cycle_bench_keeps_cpythons_collector_when_asked() -> None:
    """--collector default: the passes before the hub's collector settings were applied."""
    result = run_bench("cycle_bench.py", "--collector", "default")
    [run] = result["runs"]
    assert result["collector"] == "default" and run["placed"] == 200 and run["gc_s"] >= 0


def test_cycle_bench_places_over_many_clusters_when_asked() -> None:
    """--clusters 6 (queued): every cluster but the NotReady c1 takes tasks."""
    result = run_bench("cycle_bench.py", "--scenario", "queued", "--clusters", "6")
    [run] = result["runs"]
    assert result["clusters"] == 6 and run["placed"] == 200 and run["clusters_used"] == 5


def test_cycle_bench_places_gpu_tasks_on_gpu_nodes_when_asked() -> None:
    """--gpus 8 (queued): every task placed on GPU nodes, one GPU held each (the
    reservations in the hub's fleet view when the bench's cycles are done)."""
    result = run_bench("cycle_bench.py", "--scenario", "queued", "--clusters", "4",
                       "--gpus", "8")
    [run] = result["runs"]
    assert result["gpus_per_node"] == 8 and run["placed"] == 200 and run["clusters_used"] == 3
    assert run["gpus_held"] == 200 + 2   # and the two one-task cycles after
    assert result["profile"]["pieces"]["reserve"] > 0   # compiled or from source
    # what the placed tasks keep for the collector: each keeps some containers tracked
    assert run["tracked_per_task"] > 0 and run["full_collection_ms"] > 0


@pytest.mark.parametrize("flag", [("--tasks", "0"), ("--nodes", "-1"), ("--repeat", "0"),
                                  ("--profile", "1000"), ("--clusters", "1"),
                                  ("--gpus", "-1"), ("--gpus", "17")])
def test_cycle_bench_refuses_out_of_range_flags(flag: tuple[str, str]) -> None:
    assert_refused("cycle_bench.py", flag)


def test_cycle_bench_refuses_gpus_outside_the_queued_scenario() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "cycle_bench.py"),
                           "--gpus", "8"], capture_output=True, text=True, timeout=60,
                          cwd=ROOT)
    assert done.returncode == 2 and "--gpus needs --scenario queued" in done.stderr


def test_cycle_bench_refuses_many_clusters_in_the_failover_scenario() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "cycle_bench.py"),
                           "--clusters", "5"], capture_output=True, text=True, timeout=60,
                          cwd=ROOT)
    assert done.returncode == 2 and "--clusters above 2 needs --scenario queued" in done.stderr


def test_backlog_bench_submits_over_a_backlog_and_places_nothing_that_cannot_run() -> None:
    result = run_bench("backlog_bench.py")
    assert [r["backlog"] for r in result["runs"]] == [0, 500]
    for run in result["runs"]:    # the bench itself asserts every task is still queued
        assert run["submit_ms"] > 0 and run["submit_us_per_task"] > 0 and run["cycle_ms"] > 0
        assert run["queued_ms"] >= 0 and run["positions_ms"] >= 0 and run["lanes_ms"] >= 0


@pytest.mark.parametrize("flag", [("--backlog", "-1"), ("--batch", "0"), ("--rounds", "0"),
                                  ("--backlog", "1000000")])
def test_backlog_bench_refuses_out_of_range_flags(flag: tuple[str, str]) -> None:
    assert_refused("backlog_bench.py", flag)


def test_gate_bench_relays_bytes_and_round_trips_and_reports_their_cost() -> None:
    result = run_bench("gate_bench.py", "--phase-timeout", "120")
    gate = result["gate"]
    assert gate["bulk_mib_per_s"] > 0 and gate["pings_per_s"] > 0
    assert gate["bulk_loop_cpu_ms_per_mib"] > 0 and gate["pings_loop_cpu_us_per_trip"] > 0
    assert gate["busy_pings_per_s"] > 0


@pytest.mark.parametrize("flag", [("--conns", "0"), ("--mib", "-1"), ("--reps", "1000"),
                                  ("--phase-timeout", "nan")])
def test_gate_bench_refuses_out_of_range_flags_before_starting_anything(
        flag: tuple[str, str]) -> None:
    assert_refused("gate_bench.py", flag)


def test_submit_bench_stores_every_batch_through_rest_and_splits_the_cpu() -> None:
    result = run_bench("submit_bench.py")
    assert result["tasks"] == 400 and result["batch"] == 100 and result["measured"] == 300
    assert result["cpu_ms_per_task"] >= result["loop_cpu_ms_per_task"] > 0
    assert result["writer_cpu_ms_per_task"] >= 0 and result["wall_ms_per_task"] > 0


@pytest.mark.parametrize("store", ["sqlite", "postgresql"])
def test_write_bench_times_submits_and_reports_on_a_fenced_store(store: str,
                                                                 request: Any) -> None:
    """The writer's transactions on each backend, with the leader's fence as a hub runs it."""
    if store == "sqlite":
        result = run_bench("write_bench.py", "--tasks", "3")
    else:
        with fresh_database(request.getfixturevalue("pg_url")) as url:
            result = run_bench("write_bench.py", "--tasks", "3", "--store", url)
    assert result["store"] == store and result["submits"] == 100
    assert result["tasks_per_submit"] == 3
    for kind in ("submit", "report"):
        assert result[kind]["wall_ms"] > 0 and result[kind]["cpu_ms"] > 0


@pytest.mark.parametrize("flag", [("--submits", "0"), ("--tasks", "1001"), ("--warm", "-1")])
def test_write_bench_refuses_out_of_range_flags(flag: tuple[str, str]) -> None:
    assert_refused("write_bench.py", flag)


@pytest.mark.parametrize("store", ["sqlite", "postgresql"])
def test_writer_beside_bench_commits_slices_with_the_loop_idle_and_counts_them_beside_it(
        store: str, request: Any) -> None:
    """Idle, every counted commit is a whole slice made durable; beside the slicing loop and
    beside a thread running Python it reports what it managed (beside the loop, on this
    kind of machine often nothing: the point it shows)."""
    if store == "sqlite":
        result = run_bench("writer_beside_bench.py")
    else:
        with fresh_database(request.getfixturevalue("pg_url")) as url:
            result = run_bench("writer_beside_bench.py", "--store", url)
    assert result["store"] == store and result["batch"] == 50 and result["tasks"] == 300
    idle, slicing = result["idle"], result["slicing"]
    assert idle["commits"] > 0 and idle["rows"] == 50 * idle["commits"]
    assert idle["median_commit_ms"] > 0 and idle["rows_per_s"] > 0
    assert slicing["rows"] == 50 * slicing["commits"] >= 0
    assert idle["loop_slices"] == 0 and slicing["loop_slices"] > 0
    assert result["slicing_vs_idle"] == pytest.approx(
        slicing["rows_per_s"] / idle["rows_per_s"], abs=1e-3)
    thread = result["thread"]     # beside another thread running Python, the loop idle
    assert thread["rows"] == 50 * thread["commits"] >= 0 and thread["loop_slices"] == 0
    assert result["thread_vs_idle"] == pytest.approx(
        thread["rows_per_s"] / idle["rows_per_s"], abs=1e-3)


def test_writer_beside_bench_measures_a_loop_that_gives_way_to_the_writer() -> None:
    """With ``--give-way-ms`` a third window: the slicing loop waits for queued commits
    (time the other windows never spend), and the writer's commits are counted as whole
    slices as in the others."""
    result = run_bench("writer_beside_bench.py", "--give-way-ms", "10", "--yields", "4")
    assert result["give_way_ms"] == 10 and result["yields"] == 4
    giving = result["giving_way"]
    assert giving["loop_waited_ms"] > 0 and giving["loop_slices"] > 0
    assert result["idle"]["loop_waited_ms"] == result["slicing"]["loop_waited_ms"] == 0
    assert giving["commits"] > 0 and giving["rows"] == 50 * giving["commits"]
    assert result["giving_way_vs_idle"] == pytest.approx(
        giving["rows_per_s"] / result["idle"]["rows_per_s"], abs=1e-3)


@pytest.mark.parametrize("flag", [("--batch", "0"), ("--seconds", "0"), ("--slice-ms", "nan"),
                                  ("--tasks", "100001"), ("--give-way-ms", "-1"),
                                  ("--yields", "0"), ("--yields", "101")])
def test_writer_beside_bench_refuses_out_of_range_flags(flag: tuple[str, str]) -> None:
    assert_refused("writer_beside_bench.py", flag)


@pytest.mark.parametrize("flag", [("--tasks", "0"), ("--batch", "1001"), ("--warm", "-1"),
                                  ("--profile", "201")])
def test_submit_bench_refuses_out_of_range_flags(flag: tuple[str, str]) -> None:
    assert_refused("submit_bench.py", flag)


def test_submit_bench_refuses_to_measure_nothing() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "submit_bench.py"),
                           "--tasks", "400", "--batch", "200", "--warm", "2"],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 2 and "leaves none of the 2 batches measured" in done.stderr


def test_submit_bench_measures_one_task_batches_past_the_rest_burst() -> None:
    """1,000 one-task requests in a few seconds: far more than the default REST limit lets
    one token send (a burst of 200, then 50 a second), so the bench's hub must run without
    it, as the e2e bench's does (a 429 ends the run)."""
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "submit_bench.py"),
                           "--tasks", "1000", "--batch", "1", "--warm", "1", "--json"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["batch"] == 1 and result["measured"] == 999


def test_decision_count_counts_instructions_alike_twice(tmp_path: Path) -> None:
    """Counted twice (this tree against itself), a decision's instructions are the same:
    the count is what compares two trees on a noisy machine. A tree's first decisions cost
    more than its steady ones (they build their shape's verdicts over every cluster). The
    count toggles on the compiled engine's entry point: from source there is none."""
    if not native.STATE.compiled:
        pytest.skip(f"the engine runs from source: {native.STATE.reason}")
    result = run_bench("decision_count.py", "--against", str(ROOT), "--jobs", "2",
                       "--top", "3", "--keep", str(tmp_path))
    head, base = result["head"], result["against"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [   # --keep: callgrind's outputs
        f"callgrind.{label}.{run}" for label in ("against", "head")
        for run in ("cold.0", "steady.100", "steady.300")]
    assert head["engine"] == "compiled (mypyc)" and head["first_decisions"] > 5
    assert head["cold"]["per_decision"] > head["steady"]["per_decision"] > 0
    assert head["cold"]["per_cluster"] * result["clusters"] == pytest.approx(
        head["cold"]["per_decision"], rel=0.01)
    assert abs(result["ratio"]["cold"] - 1) < 0.001 and abs(result["ratio"]["steady"] - 1) < 0.001
    assert head["steady"]["placed"][1] > head["steady"]["placed"][0] > 0
    engine = [row["function"] for row in head["steady"]["top_engine"]]
    assert engine[0] == "scheduler.Scheduler.schedule" and len(engine) == 3
    assert len(base["cold"]["top_self"]) == 3


def test_decision_count_counts_first_decisions_alone_when_asked() -> None:
    if not native.STATE.compiled:
        pytest.skip(f"the engine runs from source: {native.STATE.reason}")
    result = run_bench("decision_count.py", "--cold-only")
    head = result["head"]
    assert "steady" not in head and "against" not in result
    assert head["cold"]["per_decision"] > 0 and 0 < head["first_decisions"] <= result["requests"]


@pytest.mark.parametrize("flag", [("--clusters", "0"), ("--jobs", "9"), ("--delta-rate", "nan"),
                                  ("--top", "-1")])
def test_decision_count_refuses_out_of_range_flags(flag: tuple[str, str]) -> None:
    assert_refused("decision_count.py", flag)


def test_grpc_paced_bench_measures_each_client_setting_in_the_same_run() -> None:
    """Clients on gRPC's defaults and on the agent's setting (the iomgr client path) both
    connect to a grpc.aio server and answer its messages; each is measured."""
    result = run_bench("grpc_paced.py")
    assert result["clients"] == 3 and result["rounds"] == 1
    settings = [w["experiments"] for w in result["windows"]]
    assert settings == ["", "-event_engine_client"]
    for window in result["windows"]:
        assert window["messages"] > 0 and window["client_us_per_message"] > 0
    first = result["medians"][""]
    assert first["client_vs_first"] == 1.0 and first["server_vs_first"] == 1.0
    agent = result["medians"]["-event_engine_client"]
    assert agent["client_vs_first"] == pytest.approx(
        agent["client_us_per_message"] / first["client_us_per_message"], abs=1e-3)


@pytest.mark.parametrize("flag", [("--clients", "0"), ("--period", "nan"),
                                  ("--rounds", "21"), ("--seconds", "0.1")])
def test_grpc_paced_bench_refuses_out_of_range_flags(flag: tuple[str, str]) -> None:
    assert_refused("grpc_paced.py", flag)


@pytest.mark.parametrize(("flags", "wanted"), [
    (["--experiments", *"abcdefghi"], "--experiments takes at most 8 settings"),
    (["--server-experiments", "x" * 1001], "an experiments setting must be at most 1000"),
])
def test_grpc_paced_bench_refuses_too_many_or_too_long_settings(flags: list[str],
                                                                 wanted: str) -> None:
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "grpc_paced.py"), *flags],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 2 and wanted in done.stderr
