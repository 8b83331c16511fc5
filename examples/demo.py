"""The demo: a hub on SQLite and three simulated member clusters, joined the real way.

Starts ``fuyao-hub serve`` (default ports 8848/8849/8851 when free), joins ``gpu-east``
(H100 + A100), ``gpu-west`` (V100 + T4) and ``edge-mixed`` (ARM + CPU-only) through the
join flow (REST join -> token file -> ``fuyao-agent`` registers over gRPC), submits the
example tasks with ``fuyaoctl task submit`` (two teams' into their own queues, created with
``fuyaoctl queue create``), waits for them to settle, and prints ``fuyaoctl cluster list``,
``cluster watch``, ``hub status``, ``task list``, ``queue list``, ``capacity``, ``capacity
fit`` and ``capacity n-1``, a ``simulate`` what-if on the live fleet and queue, and the web
view's URL. ``--keep`` leaves it running.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fuyaoctl.localstack import LocalStack, port_free, save_join

ROOT = Path(__file__).resolve().parent
FLEETS = ROOT / "fleets"
TASKS = ROOT / "tasks"
CLUSTERS = [
    # (name, fleet file, labels given at join (they win over the agent's), weight)
    ("gpu-east", "gpu-east.yaml", {"fuyao.io/region": "cn-east"}, 3),
    ("gpu-west", "gpu-west.yaml", {"fuyao.io/region": "cn-west"}, 2),
    ("edge-mixed", "edge-mixed.yaml", {"fuyao.io/region": "cn-south"}, 1),
]
TASK_FILES = ["train-h100.yaml", "finetune-a100.yaml", "inference-t4.yaml",
              "notebook-share.yaml", "etl-arm.yaml", "batch.yaml", "too-big.yaml",
              "team-a.yaml", "team-b.yaml"]
QUEUES = [  # two teams' queues: weights 2:1, GPU quotas, team-b may borrow idle quota
    ["team-a", "--weight", "2", "--quota", "gpu=8", "--quota", "cpu=64"],
    ["team-b", "--weight", "1", "--quota", "gpu=4", "--borrow", "gpu=4"],
]


def fuyaoctl(stack: LocalStack, *args: str, capture: bool = False) -> str:
    """Run fuyaoctl as a user would, showing the command; returns its output if captured."""
    print(f"\n$ fuyaoctl {' '.join(args)}", flush=True)
    script = Path(sys.executable).parent / "fuyaoctl"
    argv = [str(script)] if script.exists() else [sys.executable, "-m", "fuyaoctl.cli"]
    done = subprocess.run([*argv, *args], check=True, capture_output=capture, text=True,
                          env={**stack.env(), "COLUMNS": "160"})
    return done.stdout if capture else ""


def join(stack: LocalStack, name: str, labels: dict[str, str], weight: int) -> Path:
    """``fuyaoctl cluster join``; save the one-time token and the hub's CA for the agent."""
    label_args = [a for k, v in labels.items() for a in ("--label", f"{k}={v}")]
    out = fuyaoctl(stack, "cluster", "join", name, "--weight", str(weight), *label_args,
                   "-o", "json", capture=True)
    joined = json.loads(out)
    print(f"agent command: {joined['agent_command']}", flush=True)
    return save_join(stack.home, name, joined["token"], joined.get("ca_cert"))


def settle(stack: LocalStack, timeout: float) -> None:
    """Wait until no task is Placed (each is Running, ended, or Queued with reasons)."""
    deadline = time.monotonic() + timeout
    with stack.client() as client:
        while time.monotonic() < deadline:
            tasks = client.list_tasks()
            waiting = [t for t in tasks if t.state.value in ("Queued", "Placed")]
            # Settled: everything placed has started, and what waits has its reasons (or
            # the queue quota holding it).
            if tasks and all(t.state.value == "Queued" and (t.reasons or t.held_by)
                             for t in waiting):
                return
            time.sleep(0.5)


def task_features(hub: LocalStack) -> None:
    """Profiles, a dry-run, GPU memory sharing, a DAG, why a task waits and replicas divided
    across clusters (issue 9)."""
    fuyaoctl(hub, "profile", "apply", "-f", str(ROOT / "profiles" / "llm-train.yaml"))
    fuyaoctl(hub, "task", "submit", "--name", "probe", "--gpu", "1", "--gpu-model", "T4",
             "--dry-run")
    fuyaoctl(hub, "task", "submit", "--name", "nb", "--gpu-mem", "8Gi", "--gpu-model", "A100",
             "--duration", "1h")
    fuyaoctl(hub, "task", "submit", "-f", str(TASKS / "dag.yaml"))
    fuyaoctl(hub, "task", "explain", "too-big")
    # Replicas divided across clusters by static weights: one part (workload) per cluster.
    # (Not gpu-east: it is kept for too-big, the blocked head of its queue.)
    fuyaoctl(hub, "task", "submit", "--name", "spread", "--cpu", "1", "--replicas", "3",
             "--spread", "weighted", "--spread-weight", "gpu-west=2",
             "--spread-weight", "edge-mixed=1", "--duration", "1h")
    fuyaoctl(hub, "task", "wait", "spread", "--for", "Running", "--timeout", "30")
    fuyaoctl(hub, "task", "describe", "spread")


def main() -> int:
    """Run the demo."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--home", type=Path, default=None, help="state dir (default: temp)")
    parser.add_argument("--keep", action="store_true", help="leave hub and agents running")
    args = parser.parse_args()
    home = args.home or Path(tempfile.mkdtemp(prefix="fuyao-demo-"))
    defaults = (8848, 8849, 8851, 8850)
    ports = defaults if all(port_free(p) for p in defaults) else (0, 0, 0, 0)
    stack = LocalStack(home=home, api_port=ports[0], agent_port=ports[1],
                       health_port=ports[2], register_port=ports[3])
    print(f"Fuyao demo: state in {home}; hub REST at {stack.url}", flush=True)
    try:
        stack.start_hub()
        print(f"admin token: {stack.admin_token_file} (FUYAO_TOKEN=$(cat "
              f"{stack.admin_token_file}))", flush=True)
        fuyaoctl(stack, "auth", "whoami")
        for name, fleet, labels, weight in CLUSTERS:
            token_file = join(stack, name, labels, weight)
            stack.start_agent(name, FLEETS / fleet, token_file=token_file)
            print(f"joined {name} (weight {weight}) and started its agent", flush=True)
        stack.wait_ready([c[0] for c in CLUSTERS])
        fuyaoctl(stack, "cluster", "list")
        fuyaoctl(stack, "cluster", "watch", "--since", "0", "--timeout", "1s")
        fuyaoctl(stack, "hub", "status")
        for queue in QUEUES:
            fuyaoctl(stack, "queue", "create", *queue)
        for task_file in TASK_FILES:
            fuyaoctl(stack, "task", "submit", "-f", str(TASKS / task_file))
        settle(stack, timeout=30)
        fuyaoctl(stack, "task", "list")
        fuyaoctl(stack, "task", "describe", "too-big")
        fuyaoctl(stack, "queue", "list")
        fuyaoctl(stack, "queue", "describe", "team-b")
        task_features(stack)
        fuyaoctl(stack, "capacity")
        fuyaoctl(stack, "capacity", "fit", "--gpu", "8", "--cpu", "1", "--memory", "1Gi")
        fuyaoctl(stack, "capacity", "n-1")
        # what if gpu-east got one 16-GPU H100 node: would the queue (too-big) be placed?
        fuyaoctl(stack, "simulate", "--from-hub", "--queue", "--arrival", "10",
                 "--add-nodes", "cluster=gpu-east,model=H100,count=1,gpus=16,cpu=192,"
                 "memory=2Ti")
        fuyaoctl(stack, "auth", "token", "create", "ci-bot", "--role", "submitter",
                 "--queue", "default", "--expires", "30d")
        fuyaoctl(stack, "audit", "--limit", "5")
        fuyaoctl(stack, "cluster", "list")
        print(f"\nWeb view: {stack.url}/ui", flush=True)
        if args.keep:
            print(f"\nStill running (FUYAO_HUB={stack.url} FUYAO_TOKEN=$(cat "
                  f"{stack.admin_token_file})); Ctrl-C to stop.", flush=True)
            while True:
                time.sleep(3600)
    except KeyboardInterrupt:
        pass
    except (RuntimeError, subprocess.CalledProcessError) as exc:
        print(f"demo failed: {exc}", file=sys.stderr)
        return 1
    finally:
        stack.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
