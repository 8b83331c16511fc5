"""The SDK as a Python caller sees it: hub address, errors, auth, waiting, batches."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from fuyao.errors import (
    Conflict,
    FuyaoError,
    InvalidInput,
    NotFound,
    PermissionDenied,
    Transient,
    Unauthenticated,
)
from fuyao.spec import TaskState
from fuyaoctl import Client
from tests.cli.conftest import closed_port
from tests.cli.fakehub import FakeHub


def answering(status: int, body: Any = None, text: str | None = None) -> Client:
    """A client whose every request gets the same answer."""
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, json=body) if text is None else httpx.Response(status,
                                                                                    text=text)
    return Client(http=httpx.Client(transport=httpx.MockTransport(handler)))


@pytest.mark.parametrize(
    ("given", "env", "wanted"),
    [
        (None, None, "http://127.0.0.1:8848"),
        ("hub.example:9000", None, "http://hub.example:9000"),
        ("https://hub.example/", None, "https://hub.example"),
        (None, "10.0.0.5:8848", "http://10.0.0.5:8848"),
        ("explicit:1", "from-env:2", "http://explicit:1"),
    ],
    ids=["default", "host-port", "https-trailing-slash", "env", "arg-beats-env"],
)
def test_hub_address(given: str | None, env: str | None, wanted: str,
                     monkeypatch: pytest.MonkeyPatch) -> None:
    if env:
        monkeypatch.setenv("FUYAO_HUB", env)
    with Client(given) as client:
        assert client.hub == wanted


@pytest.mark.parametrize("bad", ["ftp://hub:1", "http://", "hub:notaport"],
                         ids=["scheme", "no-host", "bad-port"])
def test_unusable_hub_address_is_invalid_input(bad: str) -> None:
    with pytest.raises(InvalidInput, match="hub URL"):
        Client(bad)


def test_nothing_listening_is_transient_naming_the_hub() -> None:
    port = closed_port()
    with Client(f"127.0.0.1:{port}", timeout=2) as client, pytest.raises(Transient) as caught:
        client.list_clusters()
    assert str(caught.value).startswith(f"cannot reach the hub at http://127.0.0.1:{port}: ")
    assert isinstance(caught.value.__cause__, httpx.ConnectError)


@pytest.mark.parametrize(
    ("status", "body", "wanted", "message"),
    [
        (404, {"error": {"code": "NotFound", "message": "task x not found"}}, NotFound,
         "task x not found"),
        (409, {"error": {"code": "Conflict", "message": "exists"}}, Conflict, "exists"),
        (400, {"error": {"code": "InvalidInput", "message": "cpu: bad"}}, InvalidInput,
         "cpu: bad"),
        (401, {"error": {"code": "Unauthenticated", "message": "no"}}, Unauthenticated, "no"),
        (503, {"error": {"code": "Unavailable", "message": "busy"}}, Transient, "busy"),
        (418, {"error": {"code": "PermissionDenied", "message": "role"}}, PermissionDenied,
         "role"),
        (404, {"error": {"code": "SomethingNew", "message": "odd"}}, NotFound, "odd"),
        (422, {"detail": [{"msg": "field required"}]}, InvalidInput, "field required"),
        (500, None, FuyaoError, "the hub answered 500 Internal Server Error"),
        (599, {"unexpected": True}, FuyaoError, "the hub answered 599"),
    ],
    ids=["not-found", "conflict", "invalid", "unauthenticated", "unavailable",
         "code-beats-status", "unknown-code-uses-status", "framework-422", "no-body",
         "unknown-status"],
)
def test_hub_errors_become_the_error_classes(status: int, body: Any, wanted: type[Exception],
                                             message: str) -> None:
    with pytest.raises(wanted, match=message) as caught:
        answering(status, body).get_task("x")
    assert type(caught.value) is wanted


def test_non_json_success_body_is_an_error() -> None:
    with pytest.raises(FuyaoError, match="non-JSON"):
        answering(200, text="<html>proxy</html>").health()


def test_token_is_sent_as_bearer_from_arg_or_env(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeHub(token="s3cret")
    with pytest.raises(Unauthenticated):
        Client(http=fake.http()).list_clusters()
    assert Client(http=fake.http(), token="s3cret").list_clusters() == []
    monkeypatch.setenv("FUYAO_TOKEN", "s3cret")
    assert Client(http=fake.http()).health() == {"status": "ok"}


def test_invalid_spec_is_refused_before_sending() -> None:
    fake = FakeHub()
    client = Client(http=fake.http())
    with pytest.raises(InvalidInput, match=r"task t: cpu: '-2' must not be negative"):
        client.submit_task({"name": "t", "cpu": "-2"})
    with pytest.raises(InvalidInput, match=r"unknown field 'gpus' \(did you mean 'gpu'\?\)"):
        client.submit_tasks([{"name": "a"}, {"name": "b", "gpus": 1}])
    with pytest.raises(InvalidInput, match="weight"):
        client.join_cluster("c1", weight=-1)
    assert fake.requests == []


def test_batch_is_all_or_nothing() -> None:
    fake = FakeHub()
    client = Client(http=fake.http())
    client.submit_task({"name": "b"})
    with pytest.raises(Conflict):
        client.submit_tasks([{"name": "a"}, {"name": "b"}])
    assert [t.name for t in client.list_tasks()] == ["b"]
    views = client.submit_tasks([{"name": "c", "gpu": 1}, {"name": "d", "gpu": "0.5"}])
    assert [(v.name, v.state) for v in views] == [("c", "Queued"), ("d", "Queued")]


def test_list_filters_and_state_names_any_case() -> None:
    fake = FakeHub()
    fake.add_task({"name": "a"}, state=TaskState.RUNNING, cluster="east")
    fake.add_task({"name": "b"})
    client = Client(http=fake.http())
    assert [t.name for t in client.list_tasks(state="running")] == ["a"]
    assert [t.name for t in client.list_tasks(cluster="east")] == ["a"]
    with pytest.raises(InvalidInput, match="'Runing' is not one of Queued"):
        client.list_tasks(state="Runing")


def test_wait_returns_when_the_state_is_reached() -> None:
    fake = FakeHub()
    fake.add_task({"name": "t"})
    fake.scripts["t"] = [TaskState.QUEUED, TaskState.PLACED, TaskState.RUNNING]
    view = Client(http=fake.http()).wait_for_task("t", {"Running"}, timeout=5, interval=0.01)
    assert view.state == TaskState.RUNNING


@pytest.mark.parametrize(
    ("script", "error", "message"),
    [
        ([TaskState.RUNNING, TaskState.FAILED], Conflict,
         "task t is Failed; it will never be Succeeded"),
        ([TaskState.QUEUED], Transient,
         "timed out after 0.05s waiting for task t to be Succeeded; it is Queued"),
    ],
    ids=["ended-elsewhere", "timeout"],
)
def test_wait_fails_when_the_state_cannot_come(script: list[TaskState],
                                               error: type[Exception], message: str) -> None:
    fake = FakeHub()
    fake.add_task({"name": "t"})
    fake.scripts["t"] = script
    with pytest.raises(error, match=message):
        Client(http=fake.http()).wait_for_task("t", {"Succeeded"}, timeout=0.05, interval=0.01)


def test_context_manager_closes_only_its_own_http_client() -> None:
    theirs = FakeHub().http()
    with Client(http=theirs) as client:
        client.health()
    assert not theirs.is_closed
    with Client() as client:
        pass
    assert client._http.is_closed
