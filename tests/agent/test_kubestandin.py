"""The stand-in behaves as the v1.36 control plane where a client can tell (the issue's list).

Each test drives the stand-in through the real ``kubernetes`` client, as the agent does, and
asserts what a real API server and kube-scheduler answer (taints, admission messages, the
scheduler's message format, 410 after compaction, bookmarks only on request, server-side
apply and dryRun validation, DeleteOptions from the body).
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from tests.agent.kubestandin import KubeStandIn

GPU = {"cpu": "32", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": "8"}


def until(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.02)


@pytest.fixture
def standin() -> Iterator[KubeStandIn]:
    server = KubeStandIn(run_scheduler=True).start()
    yield server
    server.close()


@pytest.fixture
def core(standin: KubeStandIn) -> client.CoreV1Api:
    return client.CoreV1Api(client.ApiClient(client.Configuration(host=standin.url)))


def pod(name: str, gpu: str | None = "1", requests: dict[str, str] | None = None,
        tolerate: bool = True, **spec: Any) -> dict[str, Any]:
    resources: dict[str, Any] = {"requests": {"cpu": "1", **(requests or {})}}
    if gpu is not None:
        resources["limits"] = {"nvidia.com/gpu": gpu}
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                            "spec": {"containers": [{"name": "c", "image": "busybox",
                                                     "resources": resources}], **spec}}
    if tolerate:
        body["spec"]["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists",
                                        "effect": "NoSchedule"}]
    return body


def refusal(call: Callable[[], Any]) -> tuple[int, str]:
    with pytest.raises(ApiException) as info:
        call()
    return info.value.status, json.loads(info.value.body)["message"]


def raw(standin: KubeStandIn, method: str, path: str, body: Any) -> tuple[int, Any]:
    """A request the typed client would refuse to send."""
    request = urllib.request.Request(standin.url + path, data=json.dumps(body).encode(),
                                     method=method,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def taints(standin: KubeStandIn, node: str) -> list[str]:
    with standin.cond:
        return [f"{t['key']}:{t['effect']}" for t in standin.nodes[node]["spec"]["taints"]]


def test_new_nodes_are_tainted_not_ready_until_ready_and_cordoned_ones_unschedulable(
    standin: KubeStandIn, core: client.CoreV1Api
) -> None:
    standin.add_node("n1", {}, GPU, ready=False)
    assert core.read_node("n1").spec.taints[0].key == "node.kubernetes.io/not-ready"
    standin.set_ready("n1", True)
    until(lambda: taints(standin, "n1") == [])
    standin.cordon("n1")
    until(lambda: taints(standin, "n1") == ["node.kubernetes.io/unschedulable:NoSchedule"])


def test_no_pod_before_the_namespaces_default_service_account(
    standin: KubeStandIn, core: client.CoreV1Api
) -> None:
    assert refusal(lambda: core.create_namespaced_pod("team-a", pod("p"))) == (
        404, 'namespaces "team-a" not found')
    core.create_namespace({"metadata": {"name": "team-a"}})
    assert refusal(lambda: core.create_namespaced_pod("team-a", pod("p"))) == (
        403, 'pods "p" is forbidden: error looking up service account team-a/default: '
             'serviceaccount "default" not found')
    until(lambda: ("team-a", "default") in standin.accounts)
    assert core.create_namespaced_pod("team-a", pod("p")).spec.service_account_name == "default"


EXTENDED = {
    "only in requests": ({"requests": {"nvidia.com/gpu": "1"}},
                         'spec.containers[0].resources.requests[nvidia.com/gpu]: Invalid value: '
                         '"1": must be equal to nvidia.com/gpu limit of 0'),
    "fractional": ({"limits": {"nvidia.com/gpu": "500m"}},
                   'spec.containers[0].resources.limits[nvidia.com/gpu]: Invalid value: '
                   '"500m": must be an integer'),
    "requests above limits": ({"requests": {"nvidia.com/gpu": "2"},
                               "limits": {"nvidia.com/gpu": "1"}},
                              'spec.containers[0].resources.requests[nvidia.com/gpu]: Invalid '
                              'value: "2": must be equal to nvidia.com/gpu limit of 1'),
}


@pytest.mark.parametrize(("resources", "message"), EXTENDED.values(), ids=EXTENDED)
def test_extended_resources_must_be_whole_and_in_limits(
    core: client.CoreV1Api, resources: dict[str, Any], message: str
) -> None:
    body = pod("p", gpu=None)
    body["spec"]["containers"][0]["resources"] = resources
    assert refusal(lambda: core.create_namespaced_pod("default", body)) == (
        422, f'Pod "p" is invalid: {message}')


def test_requests_default_to_limits(core: client.CoreV1Api) -> None:
    created = core.create_namespaced_pod("default", pod("p", gpu="2"))
    assert created.spec.containers[0].resources.requests["nvidia.com/gpu"] == "2"


def test_the_schedulers_message_and_binding(standin: KubeStandIn, core: client.CoreV1Api) -> None:
    standin.add_node("full", {}, GPU)
    standin.add_node("cordoned", {}, GPU, unschedulable=True)
    for name in ("t1", "t2", "t3"):
        standin.add_node(name, {}, GPU, taints=[{"key": "dedicated", "value": "infer",
                                                  "effect": "NoSchedule"}])
    standin.add_pod("default", "hog", "full", {"nvidia.com/gpu": "8"})
    core.create_namespaced_pod("default", pod("big"))
    message = ("0/5 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) were "
               "unschedulable, 3 node(s) had untolerated taint(s). preemption: 0/5 nodes are "
               "available: 1 No preemption victims found for incoming pod, 4 Preemption is not "
               "helpful for scheduling.")

    def condition() -> Any:
        conditions = core.read_namespaced_pod("big", "default").status.conditions or []
        return next((c for c in conditions if c.type == "PodScheduled"), None)

    until(lambda: condition() is not None)
    assert (condition().status, condition().reason, condition().message) == (
        "False", "Unschedulable", message)
    standin.cordon("cordoned", False)
    until(lambda: core.read_namespaced_pod("big", "default").spec.node_name == "cordoned")
    assert condition().status == "True"
    # Never overcommitted: 8 cards, the ninth pod waits.
    for i in range(8):
        core.create_namespaced_pod("default", pod(f"one-{i}"))
    until(lambda: standin.pod("default", "one-7")["status"]["conditions"] != [])
    bound = [standin.pod("default", f"one-{i}")["spec"].get("nodeName") for i in range(8)]
    assert bound.count(None) == 1


def test_watch_is_gone_after_compaction_and_bookmarks_only_on_request(
    standin: KubeStandIn, core: client.CoreV1Api
) -> None:
    standin.add_node("n1", {}, GPU)
    old = core.list_node().metadata.resource_version
    standin.add_node("n2", {}, GPU)
    standin.compact()
    with pytest.raises(ApiException) as info:
        for _ in watch.Watch().stream(core.list_node, resource_version=old, timeout_seconds=2):
            pass
    assert info.value.status == 410
    rv = core.list_node().metadata.resource_version
    seen = [e["type"] for e in watch.Watch().stream(core.list_node, resource_version=rv,
                                                     timeout_seconds=1)]
    assert "BOOKMARK" not in seen and standin.bookmarks_sent == 0
    w = watch.Watch()
    for event in w.stream(core.list_node, resource_version=rv, timeout_seconds=3,
                          allow_watch_bookmarks=True):
        if event["type"] == "BOOKMARK":
            w.stop()
    assert standin.bookmarks_sent >= 1


def test_server_side_apply_and_dry_run_validate_against_the_schema(
    standin: KubeStandIn, core: client.CoreV1Api
) -> None:
    bad = pod("p")
    bad["spec"]["containers"][0]["imagePullPolicy"] = ["Always"]   # the client would refuse
    code, answer = raw(standin, "POST", "/api/v1/namespaces/default/pods?dryRun=All", bad)
    assert code == 422 and "imagePullPolicy" in answer["message"]
    good = pod("p")
    core.create_namespaced_pod("default", good, dry_run="All")
    assert standin.pod_names("default") == []
    unknown = pod("q")
    unknown["spec"]["containerz"] = []
    apply = "application/apply-patch+yaml"
    status, message = refusal(lambda: core.patch_namespaced_pod(
        "q", "default", unknown, field_manager="fuyao", _content_type=apply))
    assert status == 422 and "containerz" in message
    status, message = refusal(lambda: core.patch_namespaced_pod(
        "q", "default", pod("q"), _content_type="application/apply-patch+yaml"))
    assert (status, message) == (400, 'PatchOptions.meta.k8s.io "" is invalid: fieldManager: '
                                      "Required value: is required for apply patch")
    core.patch_namespaced_pod("q", "default", pod("q"), field_manager="fuyao",
                              _content_type="application/apply-patch+yaml")
    assert standin.pod_names("default") == ["q"]


def test_delete_takes_the_grace_period_from_the_body(
    standin: KubeStandIn, core: client.CoreV1Api
) -> None:
    standin.add_node("n1", {}, GPU)
    core.create_namespaced_pod("default", pod("p"))
    until(lambda: standin.pod("default", "p")["status"]["phase"] == "Running")
    core.delete_namespaced_pod("p", "default", grace_period_seconds=0,
                               body=client.V1DeleteOptions(grace_period_seconds=7))
    assert standin.pod("default", "p")["metadata"]["deletionGracePeriodSeconds"] == 7
    until(lambda: standin.pod_names("default") == [])
