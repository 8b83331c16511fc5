"""A hub that cannot start says why in one line, exits non-zero and writes nothing; a
running hub owns its home and its ports alone."""

from __future__ import annotations

import errno
import socket
import subprocess
from pathlib import Path

import pytest

from fuyaoctl.localstack import LocalStack, _command, free_port

pytestmark = pytest.mark.slow


def serve(home: Path, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """Run ``fuyao-hub serve`` expecting it to exit by itself."""
    argv = [*_command("fuyao-hub", "hub.cli"), "serve", "--home", str(home),
            "--api-port", str(free_port()), "--agent-port", str(free_port()),
            "--health-port", str(free_port()), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL, check=False)


def error_lines(result: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("error:")]


def snapshot(home: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``home`` with its size and modification time; the database files
    only by name (the running hub writes them itself)."""
    return {str(p.relative_to(home)): ((0, 0) if p.name.startswith("fuyao.db")
                                       else (p.stat().st_size, p.stat().st_mtime_ns))
            for p in sorted(home.rglob("*")) if p.is_file()}


@pytest.mark.parametrize(("args", "code", "says"), [
    (["--api-port", "70000"], 2, "--api-port 70000 is not a TCP port"),
    (["--health-port", "0"], 2, "--health-port 0 is not a TCP port"),
    (["--db", "mysql://root@localhost/fuyao"], 2, "unsupported database"),
    (["--db", "postgresql://fuyao@127.0.0.1:1/fuyao"], 3, "is unreachable"),
])
def test_bad_start_exits_non_zero_with_one_line_and_writes_nothing(
        tmp_path: Path, args: list[str], code: int, says: str) -> None:
    home = tmp_path / "home"
    result = serve(home, *args)
    assert result.returncode == code, result.stderr
    assert len(error_lines(result)) == 1 and says in error_lines(result)[0], result.stderr
    assert not home.exists()


def test_port_in_use_exits_3_and_writes_nothing(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        home = tmp_path / "home"
        for flag in ("--api-port", "--agent-port", "--health-port"):
            result = serve(home, flag, str(port))
            assert result.returncode == 3, result.stderr
            assert error_lines(result) == [
                f"error: cannot listen on 127.0.0.1:{port} ({flag}): "
                "already in use (another hub?)"]
            assert not home.exists()


def test_home_that_is_a_file_exits_3(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.write_text("not a directory")
    result = serve(home)
    assert result.returncode == 3
    assert error_lines(result) == [f"error: --home {home} is not a directory"]
    assert home.read_text() == "not a directory"


def test_second_hub_on_the_same_home_refuses_and_changes_nothing(tmp_path: Path) -> None:
    with LocalStack(home=tmp_path / "stack") as stack:
        stack.start_hub()
        with stack.client() as client:
            client.submit_task({"name": "kept", "duration": "1h"})
        home = stack.home / "hub"
        before = snapshot(home)
        result = serve(home)
        assert result.returncode == 3, result.stderr
        assert len(error_lines(result)) == 1
        assert f"--home {home} is in use by another hub (pid {stack.hub.popen.pid}" \
            in error_lines(result)[0]   # type: ignore[union-attr]
        assert snapshot(home) == before
        assert (home / "hub.lock").read_text() == f"{stack.hub.popen.pid}\n"  # type: ignore[union-attr]
        with stack.client() as client:
            assert [t.state.value for t in client.list_tasks()] == ["Queued"]
        # Once the first hub is gone, the home is free again (flock dies with the process).
        stack.stop_hub(kill=True)
        stack.start_hub()
        with stack.client() as client:
            assert [t.name for t in client.list_tasks()] == ["kept"]


def test_no_listener_shares_its_port(tmp_path: Path) -> None:
    """SO_REUSEPORT on both sides would let a second process bind the hub's ports."""
    with LocalStack(home=tmp_path / "stack") as stack:
        stack.start_hub()
        for port in (stack.api_port, stack.agent_port, stack.health_port):
            with socket.socket() as other:
                other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
                with pytest.raises(OSError) as caught:
                    other.bind(("127.0.0.1", port))
                assert caught.value.errno == errno.EADDRINUSE, port
