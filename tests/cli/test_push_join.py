"""``cluster join``: the pull-mode Helm command, and push-mode flags that cannot go together."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.conftest import Run
from tests.cli.fakehub import FakeHub


def test_join_also_prints_the_helm_install_for_the_agent_chart(run: Run, hub: FakeHub) -> None:
    lines = run("cluster", "join", "gpu-east").stdout.splitlines()
    assert ("  kubectl -n fuyao-system create secret generic fuyao-join "
            "--from-file=token=gpu-east.token --from-file=ca.crt=gpu-east-ca.crt") in lines
    assert ("  helm install fuyao-agent charts/fuyao-agent -n fuyao-system "
            "--set cluster=gpu-east --set hub=fake:8849") in lines


@pytest.mark.parametrize(("args", "message"), [
    (["--server", "https://k:6443"], "--server needs --token"),
    (["--token", "t"], "--token and --certificate-authority need --server"),
    (["--context", "prod"], "--context needs --kubeconfig"),
    (["--kubeconfig", "KUBE", "--server", "https://k"], "--kubeconfig cannot go with"),
    (["--server", "k:6443", "--token", "t"], "must be an https:// URL"),
])
def test_push_flags_that_cannot_go_together_change_nothing(
    run: Run, hub: FakeHub, tmp_path: Path, args: list[str], message: str
) -> None:
    kube = tmp_path / "kubeconfig"
    kube.write_text("current-context: x\n")
    result = run("cluster", "join", "east", *[str(kube) if a == "KUBE" else a for a in args])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert hub.clusters == {}
