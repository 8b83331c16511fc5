"""Why a task copy's pod stopped, in words an operator reads: deleted, evicted, OOM, bad image.

Called by ``convert.copy_phase`` (pods still there) and by the backend when a copy's pods are
gone (``vanished``). Kubernetes says who disrupted a pod in its ``DisruptionTarget``
condition (v1.26+: ``DeletionByTaintManager``, ``EvictionByEvictionAPI``,
``PreemptionByScheduler``, ``DeletionByPodGC``, ``TerminationByKubelet``); when it does, the
message names it. A pod the agent did not delete itself is never reported as a container
"exiting 137": its deletion is the cause, not the SIGKILL that followed.

Image pull errors are decided as Armada's executor does: the kubelet retries a failing pull
forever (``ErrImagePull`` -> ``ImagePullBackOff``), so a copy whose container is in back-off,
or whose image name is invalid, fails instead of waiting for ever.
"""

from __future__ import annotations

from typing import Any

PULL_FAILURES = ("ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull")
CONFIG_FAILURES = ("CreateContainerConfigError", "CreateContainerError")


def disruption(pod: Any) -> str:
    """``" by <reason>: <message>"`` from the pod's DisruptionTarget condition, else ``""``."""
    for condition in (pod.status.conditions or []) if pod.status else []:
        if condition.type == "DisruptionTarget" and condition.status == "True":
            detail = f": {condition.message}" if condition.message else ""
            return f" by {condition.reason or 'the control plane'}{detail}"
    return ""


def deleted(pod: Any, *, node_gone: bool = False) -> str:
    """The message for a pod that someone other than the agent deleted."""
    name = pod.metadata.name
    by = disruption(pod)
    if node_gone:
        return f"node {pod.spec.node_name} disappeared; its pod {name} was deleted{by}"
    by = by or " (not by the Fuyao agent; the API does not say by whom)"
    return f"pod {name} was deleted{by}"


def stuck(pod: Any) -> str:
    """A reason the pod can never start (bad image, bad config), else ``""``."""
    statuses = (pod.status.container_statuses or []) if pod.status else []
    statuses = statuses + ((pod.status.init_container_statuses or []) if pod.status else [])
    for container in statuses:
        waiting = container.state.waiting if container.state else None
        if waiting is None:
            continue
        if waiting.reason in PULL_FAILURES:
            return (f"image pull failed for container {container.name} "
                    f"({waiting.reason}): {waiting.message or container.image}")
        if waiting.reason in CONFIG_FAILURES:
            detail = waiting.message or waiting.reason
            return f"container {container.name} cannot be created: {detail}"
    return ""


def failed(pod: Any) -> str:
    """The message for a pod in phase Failed."""
    status = pod.status
    if status.reason == "Evicted":
        return f"pod {pod.metadata.name} was evicted: {status.message or 'node pressure'}"
    if pod.metadata.deletion_timestamp is not None:
        return deleted(pod)
    by = disruption(pod)
    if by:
        return f"pod {pod.metadata.name} was stopped{by}"
    for container in status.container_statuses or []:
        terminated = container.state.terminated if container.state else None
        if terminated is None:
            continue
        if terminated.reason == "OOMKilled":
            return f"container {container.name} was killed for running out of memory (OOMKilled)"
        if terminated.exit_code:
            detail = terminated.message or terminated.reason or "Error"
            return f"container {container.name} exited {terminated.exit_code}: {detail}"
    return status.message or status.reason or "pod failed"
