"""The trace-quality bench sums ``fuyaoctl simulate``'s reports beside the FGD figures.

The engine itself is tested in ``tests/simulate``; here: the bench's own arithmetic (FGD
baselines from the authors' CSV, means over seeds, ratios, K=1 run once per member policy)
and its exit code on bad input, on a tiny node list and pod list written per test.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import trace_quality  # noqa: E402

from tests.simulate.test_simulate_engine import GPUS, NODES, pods_csv  # noqa: E402


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    nodes, pods, fgd = tmp_path / "nodes.csv", tmp_path / "pods.csv", tmp_path / "fgd.csv"
    nodes.write_text(NODES)
    pods.write_text(pods_csv())
    fgd.write_text("workload,sc_policy,tune,seed,total_gpus,50,100\n"
                   "pods,05-BestFit,1.3,42,28,50.0,90.0\n"
                   "pods,05-BestFit,1.3,43,28,50.0,92.0\n"
                   "pods,06-FGD,1.3,42,28,50.0,95.0\n"
                   "other,06-FGD,1.3,42,28,10.0,10.0\n")
    return {"nodes": nodes, "pods": pods, "fgd": fgd}


def test_cli_prints_fgd_baselines_and_each_policy_against_them(
        files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code = trace_quality.main([
        "--nodes", str(files["nodes"]), "--pods", str(files["pods"]), "--fgd", str(files["fgd"]),
        "--clusters", "1,2", "--seeds", "42-43", "--policies", "default,random,fgd", "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["gpus"] == GPUS and out["seeds"] == [42, 43]
    assert out["fgd_single_pool"] == {"BestFit": {"50": 50.0, "100": 91.0},
                                      "FGD": {"50": 50.0, "100": 95.0}}
    runs = {(r["clusters"], r["policy"]): r for r in out["runs"]}
    # K=1: once per member policy (default and random both run best-fit members)
    assert set(runs) == {(1, "default"), (1, "fgd"), (2, "default"), (2, "random"), (2, "fgd")}
    for r in runs.values():
        assert len(r["alloc_100_by_seed"]) == 2
        assert r["alloc_pct"]["100"] == pytest.approx(sum(r["alloc_100_by_seed"]) / 2, abs=0.01)
        assert r["vs_BestFit"] == pytest.approx(r["alloc_pct"]["100"] / 91.0, abs=1e-3)
        assert r["vs_FGD"] == pytest.approx(r["alloc_pct"]["100"] / 95.0, abs=1e-3)
        assert r["member_unfit"] == 0


def test_cli_reports_a_bad_node_list_and_exits_2(
        files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code = trace_quality.main(["--nodes", str(files["nodes"]) + ":50:2",
                               "--pods", str(files["pods"]), "--fgd", str(files["fgd"])])
    assert code == 2
    assert "rows 50:52 out of range" in capsys.readouterr().err


def test_sharing_mix_turns_whole_gpu_pods_into_the_lists_own_shares() -> None:
    import sharing_mix

    text = pods_csv(100)
    heavy = sharing_mix.sharing_heavy(text, 0.5, seed=1)
    assert heavy == sharing_mix.sharing_heavy(text, 0.5, seed=1)        # seeded
    assert heavy != sharing_mix.sharing_heavy(text, 0.5, seed=2)
    before = [line.split(",") for line in text.splitlines()[1:]]
    after = [line.split(",") for line in heavy.splitlines()[1:]]
    whole = [i for i, r in enumerate(before) if r[3] == "1" and r[4] == "1000"]
    changed = [i for i in whole if after[i][4] != "1000"]
    assert len(changed) == round(0.5 * len(whole))
    shares = {r[4] for r in before if r[3] == "1" and r[4] != "1000"}
    assert {after[i][4] for i in changed} <= shares
    assert [r[0] for r in after] == [r[0] for r in before]              # names kept
    untouched = [i for i in range(len(before)) if i not in changed]
    assert all(after[i] == before[i] for i in untouched)


def test_saved_runs_summarize_to_the_same_table_as_the_live_run(
        files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    common = ["--nodes", str(files["nodes"]), "--pods", str(files["pods"]),
              "--fgd", str(files["fgd"]), "--clusters", "1,2", "--policies", "fgd", "--json"]
    saved = tmp_path / "runs.jsonl"
    assert trace_quality.main([*common, "--seeds", "42", "--save", str(saved)]) == 0
    assert trace_quality.main([*common, "--seeds", "42-43", "--save", str(saved)]) == 0
    capsys.readouterr()
    assert trace_quality.main([*common, "--seeds", "42-43"]) == 0
    want = json.loads(capsys.readouterr().out)
    assert trace_quality.main(["--fgd", str(files["fgd"]), "--json", "--load", str(saved)]) == 0
    got = json.loads(capsys.readouterr().out)
    assert len(saved.read_text().splitlines()) == 6     # seed 42 saved twice: kept once
    for key in ("pods", "gpus", "seeds", "fgd_single_pool"):
        assert got[key] == want[key]
    strip = ("seconds_per_run",)
    assert [{k: v for k, v in r.items() if k not in strip} for r in got["runs"]] == \
        [{k: v for k, v in r.items() if k not in strip} for r in want["runs"]]


def test_load_refuses_a_file_that_is_not_saved_runs(
        files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"case": [1]}\n')
    assert trace_quality.main(["--fgd", str(files["fgd"]), "--load", str(bad)]) == 2
    assert "bad.jsonl:1: not a saved run" in capsys.readouterr().err


def test_sharing_mix_can_target_a_share_of_all_gpu_pods() -> None:
    import sharing_mix

    text = pods_csv(100)
    heavy = sharing_mix.sharing_heavy(text, 0.7, seed=1, of_gpu_tasks=True)
    rows = [line.split(",") for line in heavy.splitlines()[1:]]
    gpu = [r for r in rows if int(r[3]) > 0]
    shared = [r for r in gpu if r[3] == "1" and int(r[4]) < 1000]
    assert len(shared) == round(0.7 * len(gpu))
    with pytest.raises(SystemExit, match="reachable"):
        sharing_mix.sharing_heavy(text, 1.0, seed=1, of_gpu_tasks=True)   # gangs stay whole
