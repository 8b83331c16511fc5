"""`fuyaoctl task submit`: task files, batches, flags, and bad input that sends nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fuyao.spec import TaskSpec
from fuyaoctl import read_task_file
from tests.cli.conftest import Run, as_json
from tests.cli.fakehub import FakeHub

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "tasks"
BATCHES = {
    "list": "- name: a\n  gpu: 1\n- name: b\n  gpu: 0.5\n",
    "documents": "name: a\ngpu: 1\n---\nname: b\ngpu: 0.5\n",
    "tasks-mapping": "tasks:\n  - {name: a, gpu: 1}\n  - {name: b, gpu: 0.5}\n",
}
BAD_FILES = {
    "yaml-syntax": ("name: a\n  image: x\n", "bad.yaml:2:8: invalid YAML: mapping values"),
    "unclosed-list": ("name: a\ngpu: [1, 2\n", "bad.yaml:3:1: invalid YAML: expected ','"),
    "unknown-field": ("name: a\ngpus: 2\n",
                      "bad.yaml:2: task 'a': unknown field 'gpus' (did you mean 'gpu'?)"),
    "negative-cpu": ("name: a\ncpu: '-1'\n", "bad.yaml:2: task 'a': cpu: '-1' must not be"),
    "fractional-gpus": ("name: a\ngpu: 1.5\n", "more than one GPU must be a whole number"),
    "bad-name": ("name: Train_1\n", "bad.yaml:1: task 'Train_1': name: name 'Train_1' must"),
    "missing-name": ("image: x\n", "bad.yaml:1: task #1: name: required field is missing"),
    "wrong-type": ("name: a\npriority: high\n",
                   "bad.yaml:2: task 'a': priority: Input should be a valid integer"),
    "bad-selector": ("name: a\nselector: 'arch >< x'\n", "task 'a': selector"),
    "empty": ("# nothing here\n", "bad.yaml: no tasks found"),
    "scalar": ("just a string\n", "bad.yaml:1: expected a task (a mapping of fields)"),
    "batch-extra-key": ("tasks: []\nqueue: x\n", "holds only 'tasks', found queue"),
    "duplicate-names": ("- name: a\n- name: a\n",
                        "bad.yaml:2: task 'a': name already used on line 1"),
    "one-bad-in-batch": ("- name: a\n- name: b\n  cpu: lots\n",
                         "bad.yaml:3: task 'b': cpu: 'lots' is not a quantity"),
}


def write(tmp_path: Path, text: str, name: str = "bad.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(("text", "message"), BAD_FILES.values(), ids=BAD_FILES.keys())
def test_bad_file_exits_2_names_the_file_and_sends_nothing(
    text: str, message: str, run: Run, hub: FakeHub, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path, text)
    result = run("task", "submit", "-f", "bad.yaml")
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: ")
    assert message in result.stderr
    assert "Traceback" not in result.output
    assert hub.requests == []


def test_every_problem_in_a_batch_is_reported_at_once(run: Run, hub: FakeHub,
                                                      tmp_path: Path) -> None:
    path = write(tmp_path, "- name: a\n  cpu: '-1'\n- name: b\n  gpus: 1\n- name: c\n")
    result = run("task", "submit", "-f", path)
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert lines[0].startswith(f"error: {path}:2: task 'a': cpu:")
    assert lines[1] == f"{path}:4: task 'b': unknown field 'gpus' (did you mean 'gpu'?)"
    assert hub.requests == []


def test_missing_file_exits_2(run: Run, hub: FakeHub, tmp_path: Path) -> None:
    result = run("task", "submit", "-f", str(tmp_path / "nope.yaml"))
    assert result.exit_code == 2
    assert f"error: cannot read {tmp_path / 'nope.yaml'}" in result.stderr
    assert hub.requests == []


@pytest.mark.parametrize("text", BATCHES.values(), ids=BATCHES.keys())
def test_batch_files_are_sent_as_one_batch(text: str, run: Run, hub: FakeHub,
                                           tmp_path: Path) -> None:
    result = run("-o", "json", "task", "submit", "-f", write(tmp_path, text, "batch.yaml"))
    submitted = as_json(result)
    assert [(t["name"], t["state"]) for t in submitted] == [("a", "Queued"), ("b", "Queued")]
    assert [r.url.path for r in hub.requests] == ["/api/v1/tasks:batch"]
    assert hub.tasks["b"].spec.gpu == 0.5


def test_single_task_file_prints_one_object(run: Run, hub: FakeHub, tmp_path: Path) -> None:
    path = write(tmp_path, "name: solo\ngpu: 2\ngpu_model: '>=A100'\n", "solo.yaml")
    task = as_json(run("task", "submit", "-f", path, "-o", "json"))
    assert {task["name"], task["state"], task["spec"]["gpu_model"]} == {"solo", "Queued",
                                                                       ">=A100"}
    assert [r.url.path for r in hub.requests] == ["/api/v1/tasks"]


def test_table_output_confirms_the_submission(run: Run, tmp_path: Path) -> None:
    result = run("task", "submit", "-f", write(tmp_path, BATCHES["list"], "b.yaml"))
    assert result.exit_code == 0
    assert result.stdout.startswith("2 tasks submitted:")
    assert "a  " in result.stdout and "Queued" in result.stdout


def test_file_from_stdin(run: Run, hub: FakeHub) -> None:
    result = run("task", "submit", "-f", "-", input="name: piped\ncpu: 2\n")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "task piped submitted (Queued)"
    assert hub.tasks["piped"].spec.cpu == 2


def test_bad_stdin_is_named_stdin(run: Run, hub: FakeHub) -> None:
    result = run("task", "submit", "-f", "-", input="name: x\nbogus: 1\n")
    assert result.exit_code == 2
    assert "error: <stdin>:2: task 'x': unknown field 'bogus'" in result.stderr
    assert hub.requests == []


def test_flags_build_the_task(run: Run, hub: FakeHub) -> None:
    result = run("task", "submit", "--name", "flagged", "--image", "python:3.11",
                 "--command", "python -c 'print(1)'", "--cpu", "500m", "--memory", "2Gi",
                 "--gpu", "1", "--gpu-model", "A100|H100", "--gpu-memory", "40Gi",
                 "--selector", "kubernetes.io/arch = amd64", "--queue", "research",
                 "--priority", "5", "--replicas", "2", "--duration", "30s",
                 "--label", "team=ml", "--label", "owner=ann", "-o", "json")
    assert as_json(result)["name"] == "flagged"
    body = json.loads(hub.requests[0].content)
    assert body == {
        "name": "flagged", "image": "python:3.11", "command": ["python", "-c", "print(1)"],
        "cpu": "500m", "memory": "2Gi", "gpu": "1", "gpu_model": "A100|H100",
        "gpu_memory": "40Gi", "selector": "kubernetes.io/arch = amd64", "queue": "research",
        "priority": 5, "replicas": 2, "duration": "30s",
        "labels": {"team": "ml", "owner": "ann"},
    }


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-f", "x.yaml", "--name", "a"], "use either -f FILE or task flags, not both"),
        ([], "give -f FILE, or at least --name"),
        (["--gpu", "1"], "give -f FILE, or at least --name"),
        (["--name", "a", "--label", "novalue"], "'novalue' is not KEY=VALUE"),
        (["--name", "a", "--command", "python 'unclosed"], "No closing quotation"),
        (["--name", "a", "--cpu", "-2"], "error: task a: cpu: '-2' must not be negative"),
        (["--name", "a", "--replicas", "many"], "'many' is not a valid integer"),
    ],
    ids=["file-and-flags", "nothing", "no-name", "bad-label", "bad-quoting", "negative-cpu",
         "non-integer"],
)
def test_bad_flags_exit_2_and_send_nothing(args: list[str], message: str, run: Run,
                                           hub: FakeHub) -> None:
    result = run("task", "submit", *args)
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert hub.requests == []


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.stem)
def test_examples_are_valid_and_submit(path: Path, run: Run, hub: FakeHub) -> None:
    result = run("task", "submit", "-f", str(path))
    assert result.exit_code == 0, result.output
    assert hub.tasks


def test_examples_ask_for_what_their_names_say() -> None:
    def one(name: str) -> TaskSpec:
        [spec] = read_task_file(str(EXAMPLES / f"{name}.yaml")).specs
        return spec

    assert (one("train-h100").gpu, one("train-h100").gpu_model) == (8, "H100")
    assert (one("finetune-a100").gpu, one("finetune-a100").gpu_model) == (2, ">=A100")
    assert (one("inference-t4").gpu, one("inference-t4").gpu_model) == (1, "T4")
    assert one("notebook-share").requests().gpu_milli == 500
    assert one("etl-arm").selector == "kubernetes.io/arch = arm64"
    assert one("etl-arm").requests().gpu_milli == 0
    big = one("too-big")
    assert (big.requests().gpu_devices, big.gpu_model, big.replicas) == (16, "H100", 1)
    batch = read_task_file(str(EXAMPLES / "batch.yaml"))
    assert batch.batch and 3 <= len(batch.specs) <= 4
    dag = read_task_file(str(EXAMPLES / "dag.yaml"))
    assert [(s.name, s.after) for s in dag.specs] == [
        ("dag-prep", []), ("dag-train", ["dag-prep"]), ("dag-eval", ["dag-train", "dag-prep"])]
    teams = [*read_task_file(str(EXAMPLES / "team-a.yaml")).specs,
             *read_task_file(str(EXAMPLES / "team-b.yaml")).specs]
    assert {s.queue for s in teams} == {"team-a", "team-b"}
    for spec in [*batch.specs, *dag.specs, *teams,
                 *(one(p.stem) for p in EXAMPLES.glob("*.yaml")
                   if p.stem not in ("batch", "dag", "team-a", "team-b"))]:
        assert 10 <= spec.duration_seconds() <= 60, spec.name
