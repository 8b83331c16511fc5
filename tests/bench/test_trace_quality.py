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
