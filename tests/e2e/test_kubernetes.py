"""Kubernetes members end to end: a real hub process, real ``fuyao-agent --backend kube``
processes (one started by hand: pull mode; one run by the hub itself: push mode), each
against a stand-in API server whose scheduler loop binds the pods (``tests/agent/kubestandin``).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from fuyao.kubefence import WATCHDOG, watchdog_rules
from fuyaoctl.localstack import LocalStack, Proc, _command
from tests.agent.kubestandin import KubeStandIn
from tests.agent.kubestandin.tls import make_tls
from tests.e2e.conftest import FAST_TIMINGS

pytestmark = pytest.mark.slow
NS = "fuyao-tasks"
A100 = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
V100 = {"nvidia.com/gpu.product": "Tesla-V100-PCIE-16GB"}
GPU_TAINT = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]


def alloc(gpus: int) -> dict[str, str]:
    return {"cpu": "32", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": str(gpus)}


def until(check: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


class Federation:
    """A hub that takes push joins, and the stand-ins of its members."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.key = tmp / "push.key"
        self.key.write_text(secrets.token_urlsafe(48))
        config = tmp / "hub.yaml"
        config.write_text(yaml.safe_dump(FAST_TIMINGS))
        self.stack = LocalStack(home=tmp / "stack", hub_args=[
            "--config", str(config), "--secrets-key-file", str(self.key)])
        self.standins: list[KubeStandIn] = []
        self.pull_agent: Proc | None = None

    def standin(self, **kwargs: Any) -> KubeStandIn:
        server = KubeStandIn(run_scheduler=True, **kwargs).start()
        self.standins.append(server)
        return server

    def ctl(self, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
        exe = Path(sys.executable).parent / "fuyaoctl"
        done = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=90,
                              env=self.stack.env())
        if ok:
            assert done.returncode == 0, done.stderr
        return done

    def ctl_json(self, *args: str) -> Any:
        return json.loads(self.ctl(*args, "-o", "json").stdout)

    def start_pull_agent(self, name: str, server: KubeStandIn) -> Proc:
        kubeconfig = self.tmp / f"{name}.kubeconfig"
        kubeconfig.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [{"name": "c", "cluster": {"server": server.url}}],
            "users": [{"name": "u", "user": {}}],
            "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
        home = self.stack.home
        argv = [*_command("fuyao-agent", "member_agent.launch"), "--hub",
                f"127.0.0.1:{self.stack.agent_port}", "--cluster", name,
                "--token-file", str(home / f"{name}.token"),
                "--ca-cert", str(home / f"{name}-ca.crt"),
                "--register", f"127.0.0.1:{self.stack.register_port}", "--state-dir",
                str(home / f"agent-{name}"), "--backend", "kube", "--kubeconfig",
                str(kubeconfig), "--heartbeat-interval", "0.5", "--gang-timeout", "3",
                "--namespace", NS]
        self.pull_agent = self.stack._spawn(f"agent-{name}", argv)
        self.stack.agents[name] = self.pull_agent
        return self.pull_agent

    def close(self) -> None:
        self.stack.close()
        for server in self.standins:
            server.close()


@pytest.fixture
def fed(tmp_path: Path) -> Iterator[Federation]:
    federation = Federation(tmp_path)
    try:
        yield federation
    finally:
        federation.close()


def push_member(fed: Federation) -> tuple[KubeStandIn, list[str]]:
    """A TLS API server with a bearer token: three 8-GPU A100 nodes, one cordoned."""
    ca, cert, key = make_tls(fed.tmp / "tls")
    server = fed.standin(token="member-sa-token", tls=(str(cert), str(key)))
    for i in range(3):
        server.add_node(f"a100-{i}", A100, alloc(8), taints=GPU_TAINT, unschedulable=i == 2)
    return server, ["--server", server.url, "--token", "member-sa-token",
                    "--certificate-authority", str(ca)]


def pull_member(fed: Federation, name: str = "west", *, headroom: float = 0.1) -> KubeStandIn:
    """A plain-HTTP API server with two 4-GPU V100 nodes, and its agent started by hand."""
    server = fed.standin()
    for i in range(2):
        server.add_node(f"v100-{i}", V100, alloc(4), taints=GPU_TAINT)
    fed.stack.join(name, labels={"fuyao.io/region": name}, headroom=headroom)
    fed.start_pull_agent(name, server)
    return server


def task(fed: Federation, name: str) -> dict[str, Any]:
    return dict(fed.ctl_json("task", "describe", name))


def test_push_and_pull_members_are_ready_with_the_right_gpu_totals(fed: Federation) -> None:
    fed.stack.start_hub()
    _, push_flags = push_member(fed)
    joined = fed.ctl("cluster", "join", "east", "--label", "fuyao.io/region=east", *push_flags)
    assert "joined in push mode" in joined.stdout and "listed 3 node(s)" in joined.stdout
    pull_member(fed)
    fed.stack.wait_ready(["east", "west"], timeout=60)
    views = {c["name"]: c for c in fed.ctl_json("cluster", "list")}
    assert (views["east"]["mode"], views["east"]["gpus"], views["east"]["gpus_unschedulable"]) \
        == ("push", {"A100": 24}, {"A100": 8})
    assert (views["west"]["mode"], views["west"]["gpus"]) == ("pull", {"V100": 8})
    (east,) = [r for r in fed.ctl_json("capacity", "--cluster", "east")["rows"]
               if r["model"] == "A100"]
    assert (east["devices_total"], east["devices_free"], east["devices_unschedulable"]) == (
        24, 14.4, 8)
    listed = fed.ctl("cluster", "list").stdout
    assert "24xA100 (8 unschedulable)" in listed
    # The credentials are encrypted at rest and never echoed.
    vault = fed.stack.home / "hub" / "push"
    sealed = (vault / "east.kubeconfig.enc").read_bytes()
    assert b"member-sa-token" not in sealed
    assert "member-sa-token" not in json.dumps(fed.ctl_json("cluster", "describe", "east"))
    # Remove stops the hub's agent for it and deletes the credentials.
    fed.ctl("cluster", "remove", "east", "--yes")
    assert not (vault / "east.kubeconfig.enc").exists() and not (vault / "east").exists()
    assert [c["name"] for c in fed.ctl_json("cluster", "list")] == ["west"]


def test_a_push_join_with_too_little_rbac_names_the_verb_and_changes_nothing(
    fed: Federation
) -> None:
    fed.stack.start_hub()
    server, flags = push_member(fed)
    server.denied.add(("list", "nodes"))
    refused = fed.ctl("cluster", "join", "east", *flags, ok=False)
    assert refused.returncode != 0
    assert 'RBAC denies verb "list" on "nodes"' in refused.stderr
    assert 'cannot list resource "nodes"' in refused.stderr
    server.denied = {("watch", "pods"), ("create", "pods")}
    refused = fed.ctl("cluster", "join", "east", *flags, ok=False)
    assert "RBAC does not allow: watch pods, create pods" in refused.stderr
    bad_token = [f if f != "member-sa-token" else "wrong" for f in flags]
    refused = fed.ctl("cluster", "join", "east", *bad_token, ok=False)
    assert "refused the credentials (401 Unauthorized)" in refused.stderr
    assert fed.ctl_json("cluster", "list") == []
    assert not list((fed.stack.home / "hub" / "push").glob("*.enc"))


def test_delegation_unschedulable_message_restart_adoption_and_a_ghost_pod(
    fed: Federation
) -> None:
    fed.stack.start_hub()
    west = pull_member(fed)
    fed.stack.wait_ready(["west"], timeout=60)
    fed.ctl("task", "submit", "--name", "train", "--gpu", "2", "--gpu-model", "V100")
    pod = until(lambda: west.pod_names(NS), "the pod")[0]
    # Bound by the stand-in's scheduler loop, not by the agent.
    until(lambda: task(fed, "train")["state"] == "Running", "Running")
    assert task(fed, "train")["node"] == west.pod(NS, pod)["spec"]["nodeName"]
    assert not any("binding" in path for _, path in west.requests)

    # An agent killed mid-way and started again adopts its pod: no second one.
    assert fed.pull_agent is not None
    fed.pull_agent.stop(kill=True)
    fed.start_pull_agent("west", west)
    fed.stack.wait_ready(["west"], timeout=60)
    time.sleep(2)
    assert west.pod_names(NS) == [pod]
    assert task(fed, "train")["state"] == "Running"

    # A pod force-deleted behind the agent's back is reported, not left Running.
    west.delete_pod(NS, pod, grace=0)
    failed = until(lambda: (t := task(fed, "train"))["state"] == "Failed" and t, "Failed")
    assert f"pod {pod} was deleted" in failed["message"]

    # The member's scheduler says why it cannot bind, verbatim in task describe.
    with west.cond:
        for node in west.nodes.values():
            node["spec"]["taints"].append(
                {"key": "dedicated", "value": "infer", "effect": "NoSchedule"})
            west.record("nodes", "MODIFIED", node)
    fed.ctl("task", "submit", "--name", "stuck", "--gpu", "1", "--gpu-model", "V100")
    message = ("0/2 nodes are available: 2 node(s) had untolerated taint(s). preemption: 0/2 "
               "nodes are available: 2 Preemption is not helpful for scheduling.")
    until(lambda: message in json.dumps(task(fed, "stuck")), "the scheduler's message")
    described = fed.ctl("task", "describe", "stuck").stdout
    assert message in described


def test_a_gang_that_cannot_fully_bind_is_rolled_back_and_spills_over(fed: Federation) -> None:
    fed.stack.start_hub()
    west = pull_member(fed, headroom=0.0)
    with west.cond:   # one node taken away from Fuyao's pods: only one replica can bind
        west.nodes["v100-1"]["spec"]["taints"].append(
            {"key": "dedicated", "value": "infer", "effect": "NoSchedule"})
    fed.stack.join("south", labels={"fuyao.io/region": "south"}, headroom=0.0)
    south = fed.standin()
    for i in range(2):
        south.add_node(f"v100-{i}", V100, alloc(4), taints=GPU_TAINT)
    fed.start_pull_agent("south", south)
    fed.stack.wait_ready(["west", "south"], timeout=60)
    spec = {"name": "gang", "gpu": 4, "gpu_model": "V100", "replicas": 2, "gang": True,
            "cluster_preference": [{"selector": "fuyao.io/region = west", "weight": 100}]}
    spec_file = fed.tmp / "gang.yaml"
    spec_file.write_text(yaml.safe_dump(spec))
    fed.ctl("task", "submit", "-f", str(spec_file))
    try:
        until(lambda: "gang of 2: 1 of 2 replicas bound" in json.dumps(task(fed, "gang")),
              "the rollback", timeout=60)
    except AssertionError:
        raise AssertionError(json.dumps(task(fed, "gang"), indent=1)[-3000:]
                             + fed.stack.agents["west"].tail()) from None
    until(lambda: not west.pod_names(NS), "the gang's pods gone from west")
    done = until(lambda: (t := task(fed, "gang"))["state"] == "Running"
                 and t["cluster"] == "south" and t, "spill-over to south", timeout=90)
    assert done["cluster"] == "south"
    assert len(south.pod_names(NS)) == 2


def push_agent_pid(cluster: str) -> int:
    """The pid of the ``fuyao-agent`` child the hub runs for a push member."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if (any(a.endswith(b"fuyao-agent") for a in argv[:2]) and b"--kubeconfig" in argv
                and b"--cluster" in argv and argv[argv.index(b"--cluster") + 1]
                == cluster.encode()):
            return int(proc.name)
    raise AssertionError(f"no push agent for {cluster}")


def member_kubeconfig(path: Path, server: KubeStandIn, flags: list[str]) -> Path:
    """A kubeconfig for a push member's stand-in (the credentials of ``push_member``)."""
    token, ca = flags[flags.index("--token") + 1], flags[flags.index("--certificate-authority")
                                                        + 1]
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": server.url,
                                               "certificate-authority": ca}}],
        "users": [{"name": "u", "user": {"token": token}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    return path


def test_a_push_join_installs_the_fencing_watchdog_and_remove_takes_it_away(
    fed: Federation
) -> None:
    fed.stack.start_hub()
    east, flags = push_member(fed)
    east.denied = {("create", "deployments")}
    refused = fed.ctl("cluster", "join", "east", *flags, ok=False)
    assert "cannot install the fencing watchdog (Deployment fuyao-tasks/fuyao-watchdog): " \
           "403" in refused.stderr
    assert fed.ctl_json("cluster", "list") == []
    assert not east.roles and not east.rolebindings and not east.deployments
    east.denied = set()
    fed.ctl("cluster", "join", "east", *flags)
    key = (NS, WATCHDOG)
    assert east.roles[key]["rules"] == watchdog_rules("fuyao-agent")
    assert east.rolebindings[key]["subjects"][0]["name"] == WATCHDOG
    assert key in east.accounts
    container = east.deployments[key]["spec"]["template"]["spec"]["containers"][0]
    assert container["args"] == ["watchdog", f"--namespace={NS}", "--lease-name=fuyao-agent",
                                 "--interval=1"]
    fed.ctl("cluster", "remove", "east", "--yes")
    assert not east.roles and not east.rolebindings and not east.deployments
    assert key not in east.accounts


def test_a_frozen_push_agent_is_fenced_by_its_watchdog_before_the_hub_moves_the_task(
    fed: Federation
) -> None:
    """SIGSTOP the hub's agent for a push member: the watchdog the hub installed there (run
    here with the Deployment's own command) deletes the task pod once the Lease expires,
    before the hub re-places the task on another member; never two copies at once."""
    fed.stack.start_hub()
    east, flags = push_member(fed)
    fed.ctl("cluster", "join", "east", "--label", "fuyao.io/region=east", *flags)
    west = pull_member(fed, headroom=0.0)
    fed.stack.wait_ready(["east", "west"], timeout=60)
    spec = {"name": "fenced", "gpu": 1,
            "cluster_preference": [{"selector": "fuyao.io/region = east", "weight": 100}]}
    spec_file = fed.tmp / "fenced.yaml"
    spec_file.write_text(yaml.safe_dump(spec))
    fed.ctl("task", "submit", "-f", str(spec_file))
    until(lambda: (t := task(fed, "fenced"))["state"] == "Running" and t["cluster"] == "east",
          "Running on east")
    container = east.deployments[(NS, WATCHDOG)]["spec"]["template"]["spec"]["containers"][0]
    kubeconfig = member_kubeconfig(fed.tmp / "east.kubeconfig", east, flags)
    watchdog = fed.stack._spawn("watchdog-east", [
        *_command(container["command"][0], "member_agent.launch"), *container["args"],
        "--kubeconfig", str(kubeconfig)])
    try:
        _fence_and_move(fed, east, west)
    finally:
        watchdog.stop()     # not one of the stack's agents: it would outlive the test


def _fence_and_move(fed: Federation, east: KubeStandIn, west: KubeStandIn) -> None:
    """Freeze east's push agent; the watchdog must delete the pod before west runs it."""

    def running(server: KubeStandIn) -> list[str]:
        with server.cond:
            return [n for (ns, n), p in server.pods.items() if ns == NS
                    and p["metadata"].get("deletionTimestamp") is None]

    agent = push_agent_pid("east")
    os.kill(agent, signal.SIGSTOP)
    try:
        overlap, deleted_at, moved_at = False, None, None
        deadline = time.monotonic() + 90
        while moved_at is None and time.monotonic() < deadline:
            on_east, on_west = running(east), running(west)
            overlap = overlap or bool(on_east and on_west)
            if not on_east and deleted_at is None:
                deleted_at = time.monotonic()
            if on_west:
                moved_at = time.monotonic()
            time.sleep(0.05)
    finally:
        os.kill(agent, signal.SIGCONT)
    assert deleted_at is not None, "the watchdog never fenced east:\n" + (
        fed.stack.home / "logs" / "watchdog-east.log").read_text()[-2000:]
    assert moved_at is not None, "the hub never moved the task to west"
    assert not overlap and deleted_at < moved_at
    until(lambda: (t := task(fed, "fenced"))["state"] == "Running" and t["cluster"] == "west",
          "Running on west")
