"""fuyaoctl commands as a user sees them: output, JSON/YAML shapes, exit codes."""

from __future__ import annotations

import pytest
import yaml
from click.testing import CliRunner

from fuyao.capacity import ClusterLoss, NMinusOne
from fuyao.spec import CapacityRow, ClusterScore, TaskEvent, TaskState
from fuyaoctl.cli import AppContext, cli
from tests.cli.conftest import Run, as_json, closed_port
from tests.cli.fakehub import NOW, FakeHub

EAST_REASON = "no node with 16 free GPUs of fuyao.io/gpu-model = H100 (largest: 8)"


@pytest.fixture
def fleet(hub: FakeHub) -> FakeHub:
    """Two Ready clusters, a running task on east and a task that fits nowhere."""
    hub.add_cluster("east", labels={"fuyao.io/region": "cn-east"}, weight=3, nodes=4,
                    gpus={"H100": 32}, tasks=1)
    hub.add_cluster("west", gpus={"T4": 8})
    hub.add_task({"name": "train", "gpu": 8, "gpu_model": "H100"},
                 state=TaskState.RUNNING, cluster="east", node="h100-1", generation=1)
    hub.add_task(
        {"name": "too-big", "gpu": 16, "gpu_model": "H100"},
        message="0/2 clusters are available: 2 no node with 16 free GPUs.",
        reasons={"east": EAST_REASON, "west": "no node with fuyao.io/gpu-model = H100"},
        scores=[ClusterScore(cluster="east", feasible=False, reason=EAST_REASON)],
        events=[TaskEvent(at=NOW, kind="Submitted", message="stored in queue default"),
                TaskEvent(at=NOW, kind="Unplaceable", message="0/2 clusters are available")],
    )
    hub.capacity_rows = [
        CapacityRow(cluster="east", model="H100", nodes=4, devices_total=32,
                    devices_allocated=8, devices_reserved=3.2, devices_free=20.8,
                    cpu_total=888, cpu_allocated=64, cpu_reserved=88.8, cpu_free=735.2,
                    memory_total_gib=7840, memory_allocated_gib=512, memory_reserved_gib=784,
                    memory_free_gib=6544, gpu_memory_total_gib=2560,
                    gpu_memory_allocated_gib=640, gpu_memory_free_gib=1920),
        CapacityRow(cluster="west", model="T4", nodes=2, devices_total=8, devices_allocated=0.5,
                    devices_reserved=0.8, devices_free=6.7, cpu_total=95.5, cpu_allocated=2,
                    cpu_reserved=9.5, cpu_free=84, memory_total_gib=366,
                    memory_allocated_gib=8, memory_reserved_gib=36.6, memory_free_gib=321.4),
    ]
    return hub


# -- output formats --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["-o", "json", "cluster", "list"],
        ["cluster", "list", "-o", "json"],
        ["cluster", "-o", "json", "list"],
        ["--output", "JSON", "cluster", "list"],
        ["-o", "yaml", "cluster", "list", "--output", "json"],
    ],
    ids=["before", "after", "between", "long-any-case", "after-wins"],
)
def test_output_flag_works_before_and_after_the_command(args: list[str], run: Run,
                                                        fleet: FakeHub) -> None:
    clusters = as_json(run(*args))
    assert [c["name"] for c in clusters] == ["east", "west"]
    for cluster in clusters:
        assert {"name", "state", "labels", "weight", "headroom"} <= set(cluster)
    assert clusters[0]["labels"] == {"fuyao.io/region": "cn-east"}


def test_yaml_output_is_the_same_data_as_json(run: Run, fleet: FakeHub) -> None:
    as_yaml = yaml.safe_load(run("task", "list", "-o", "yaml").stdout)
    assert as_yaml == as_json(run("task", "list", "-o", "json"))
    assert {"name", "state", "cluster"} <= set(as_yaml[0])


def test_task_list_json_and_filters(run: Run, fleet: FakeHub) -> None:
    tasks = as_json(run("-o", "json", "task", "list"))
    assert {(t["name"], t["state"], t["cluster"]) for t in tasks} == {
        ("train", "Running", "east"), ("too-big", "Queued", None)}
    running = as_json(run("-o", "json", "task", "list", "--state", "running"))
    assert [t["name"] for t in running] == ["train"]
    assert fleet.requests[-1].url.params["state"] == "Running"
    on_west = as_json(run("-o", "json", "task", "list", "--cluster", "west"))
    assert on_west == []


def test_tables_show_the_rows(run: Run, fleet: FakeHub) -> None:
    clusters = run("cluster", "list").stdout.splitlines()
    assert clusters[0].split() == ["NAME", "STATE", "MODE", "WEIGHT", "HEADROOM", "NODES",
                                   "GPUS", "TASKS", "HEARTBEAT", "LABELS"]
    assert clusters[1].split()[:7] == ["east", "Ready", "pull", "3", "10%", "4", "32xH100"]
    tasks = run("task", "list").stdout
    assert "train" in tasks and "8 H100" in tasks and "h100-1" in tasks


# -- clusters --------------------------------------------------------------------------------


def test_join_prints_the_token_once_and_the_agent_command(run: Run, hub: FakeHub) -> None:
    result = run("cluster", "join", "gpu-east", "--label", "fuyao.io/region=cn-east",
                 "--weight", "3", "--headroom", "0.2", "--token-ttl", "2h")
    assert result.exit_code == 0, result.output
    assert "shown only once" in result.stdout
    lines = result.stdout.splitlines()
    assert "Token: fyj_gpu-east_secret" in lines
    assert "  (umask 077; echo fyj_gpu-east_secret > gpu-east.token)" in lines
    assert ("  fuyao-agent --hub fake:8849 --cluster gpu-east --token-file gpu-east.token "
            "--ca-cert gpu-east-ca.crt") in lines
    ca_at = lines.index("  cat > gpu-east-ca.crt <<'EOF'")
    assert lines[ca_at + 1: ca_at + 4] == ["-----BEGIN CERTIFICATE-----", "ZmFrZQ==",
                                           "-----END CERTIFICATE-----"]
    assert lines[ca_at + 4] == "EOF"
    joined = hub.clusters["gpu-east"]
    assert (joined.labels, joined.weight, joined.headroom) == (
        {"fuyao.io/region": "cn-east"}, 3, 0.2)


def test_join_json(run: Run) -> None:
    answer = as_json(run("-o", "json", "cluster", "join", "c1", "--token-ttl", "2h"))
    assert set(answer) == {"cluster", "token", "agent_command", "expires_at", "ca_cert"}
    assert answer["cluster"] == "c1"
    assert answer["expires_at"].startswith("2025-01-01T02:00:00")


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["cluster", "join", "east"], 1, "error: cluster east already exists"),
        (["cluster", "join", "Bad_Name"], 2, "cluster name 'Bad_Name' must be"),
        (["cluster", "join", "c9", "--headroom", "1.5"], 2, "headroom"),
        (["cluster", "join", "c9", "--token-ttl", "soon"], 2, "--token-ttl"),
        (["cluster", "describe", "nope"], 1, "error: cluster nope not found"),
        (["cluster", "cordon", "nope"], 1, "error: cluster nope not found"),
        (["task", "describe", "nope"], 1, "error: task nope not found"),
        (["task", "cancel", "nope"], 1, "error: task nope not found"),
        (["task", "list", "--state", "Sleeping"], 2, "'Sleeping' is not one of"),
        (["cluster", "frobnicate"], 2, "No such command 'frobnicate'"),
        (["-o", "xml", "cluster", "list"], 2, "'xml' is not one of"),
    ],
    ids=["duplicate-cluster", "bad-cluster-name", "headroom-too-big", "bad-ttl",
         "unknown-cluster", "cordon-unknown", "unknown-task", "cancel-unknown", "bad-state",
         "bad-command", "bad-output"],
)
def test_errors_exit_with_their_code_and_no_traceback(args: list[str], code: int, message: str,
                                                       run: Run, fleet: FakeHub) -> None:
    result = run(*args)
    assert result.exit_code == code, result.output
    assert message in result.stderr
    assert "Traceback" not in result.output


def test_describe_cluster(run: Run, fleet: FakeHub) -> None:
    out = run("cluster", "describe", "east").stdout
    for line in ("Name:", "east"), ("Labels:", "fuyao.io/region=cn-east"), ("GPUs:", "32xH100"):
        assert any(line[0] in row and line[1] in row for row in out.splitlines()), line


def test_cordon_and_uncordon(run: Run, fleet: FakeHub) -> None:
    assert run("cluster", "cordon", "east").stdout.strip() == (
        "cluster east cordoned (state Cordoned)")
    assert fleet.clusters["east"].cordoned
    view = as_json(run("cluster", "uncordon", "east", "-o", "json"))
    assert (view["name"], view["state"], view["cordoned"]) == ("east", "Ready", False)


def test_remove_asks_first_and_reports_requeued_tasks(run: Run, fleet: FakeHub) -> None:
    refused = run("cluster", "remove", "east", input="n\n")
    assert refused.exit_code == 1
    assert "east" in fleet.clusters
    removed = run("cluster", "remove", "east", input="y\n")
    assert removed.exit_code == 0
    assert "cluster east removed; 1 task sent back to the queue" in removed.stdout
    assert fleet.tasks["train"].state == TaskState.QUEUED
    assert as_json(run("-o", "json", "cluster", "remove", "west", "--yes")) == {
        "removed": "west", "requeued": 0}


# -- tasks -----------------------------------------------------------------------------------


def test_describe_queued_task_shows_why_each_cluster_rejected_it(run: Run,
                                                                 fleet: FakeHub) -> None:
    out = run("task", "describe", "too-big").stdout
    assert "State:" in out and "Queued" in out
    assert "0/2 clusters are available" in out
    assert "Why not placed:" in out
    rows = out[out.index("Why not placed:"):].splitlines()
    assert any(r.split()[0] == "east" and EAST_REASON in r for r in rows)
    assert any(r.split()[0] == "west" and "gpu-model = H100" in r for r in rows)
    assert "Selector:" in out and "fuyao.io/gpu-model = H100" in out
    assert "Unplaceable" in out


def test_describe_running_task(run: Run, fleet: FakeHub) -> None:
    out = run("task", "describe", "train").stdout
    assert "Why not placed:" not in out
    assert "h100-1" in out and "Generation:" in out
    view = as_json(run("task", "describe", "too-big", "-o", "json"))
    assert view["reasons"]["east"] == EAST_REASON
    assert view["scores"][0]["cluster"] == "east"


def test_cancel(run: Run, fleet: FakeHub) -> None:
    assert run("task", "cancel", "train").stdout.strip().startswith("task train is Cancelled")
    again = run("task", "cancel", "train")
    assert again.exit_code == 1
    assert again.stderr.strip() == "error: task train is already Cancelled"


@pytest.mark.parametrize(
    ("script", "goal", "code", "output"),
    [
        (["Placed", "Running"], "running", 0, "task train is Running on east"),
        (["Placed", "Succeeded"], "Running", 0, "task train is Succeeded"),
        (["Running", "Succeeded"], "terminal", 0, "task train is Succeeded"),
        (["Running", "Failed"], "terminal", 0, "task train is Failed"),
        (["Running", "Failed"], "Succeeded", 1,
         "error: task train is Failed; it will never be Succeeded"),
        (["Queued"], "Running", 1, "error: timed out after 0.05s waiting for task train"),
    ],
    ids=["running", "finished-counts-as-started", "terminal", "failed-is-terminal",
         "failed-not-succeeded", "timeout"],
)
def test_wait(script: list[str], goal: str, code: int, output: str, run: Run,
              fleet: FakeHub) -> None:
    fleet.scripts["train"] = [TaskState(state) for state in script]
    # Generous unless the case is the timeout itself: a loaded machine must not fail it.
    timeout = "0.05" if output.startswith("error: timed out") else "30"
    result = run("task", "wait", "train", "--for", goal, "--timeout", timeout,
                 "--interval", "0.01")
    assert result.exit_code == code, result.output
    assert output in (result.stdout if code == 0 else result.stderr)


# -- capacity --------------------------------------------------------------------------------


def test_capacity_table(run: Run, fleet: FakeHub) -> None:
    lines = run("capacity").stdout.splitlines()
    assert lines[0].split() == ["CLUSTER", "MODEL", "NODES", "DEV", "ALLOC", "RSVD", "FREE",
                                "UNSCHED", "FRAG", "QUEUED", "CPU-FREE", "MEM-FREE", "GPU-MEM",
                                "N-1"]
    assert lines[1].split() == ["east", "H100", "4", "32", "8", "3.2", "20.8", "0", "0", "0",
                                "735.2", "6544", "2560/640/1920", "-"]
    assert lines[2].split()[:7] == ["west", "T4", "2", "8", "0.5", "0.8", "6.7"]


def test_capacity_json_for_one_cluster(run: Run, fleet: FakeHub) -> None:
    report = as_json(run("capacity", "--cluster", "west", "-o", "json"))
    assert [(r["group"], r["model"], r["devices_free"]) for r in report["rows"]] == [
        ("west", "T4", 6.7)]
    assert fleet.requests[-1].url.params["cluster"] == "west"


def test_cluster_list_warns_when_the_fleet_is_not_n_minus_one_safe(run: Run,
                                                                   fleet: FakeHub) -> None:
    assert "N-1" not in run("cluster", "list").stdout
    fleet.n1 = NMinusOne(safe=False, rule="failover", clusters={
        "east": ClusterLoss(safe=False, tasks=1, unplaced=["train"], short={"H100": 8})})
    out = run("cluster", "list").stdout.splitlines()
    assert out[-1] == ("WARNING: the fleet is not N-1 safe: losing east would strand tasks "
                       "(see: fuyaoctl capacity n-1)")
    assert "WARNING" not in run("cluster", "list", "-o", "json").stdout
    n1 = run("capacity", "n-1").stdout
    assert "east" in n1 and "H100=8" in n1 and "NOT safe" in n1


# -- connection ------------------------------------------------------------------------------


def test_nothing_listening_is_a_clear_error() -> None:
    port = closed_port()
    result = CliRunner().invoke(cli, ["--hub", f"127.0.0.1:{port}", "cluster", "list"])
    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: cannot reach the hub at http://127.0.0.1:{port}: ")
    assert "Traceback" not in result.output


def test_token_flag_and_env_reach_the_hub(monkeypatch: pytest.MonkeyPatch) -> None:
    hub = FakeHub(token="s3cret")

    def invoke(*args: str) -> int:
        return CliRunner().invoke(cli, list(args), obj=AppContext(http=hub.http())).exit_code

    assert invoke("cluster", "list") == 1
    assert invoke("--token", "s3cret", "cluster", "list") == 0
    monkeypatch.setenv("FUYAO_TOKEN", "s3cret")
    assert invoke("cluster", "list") == 0
