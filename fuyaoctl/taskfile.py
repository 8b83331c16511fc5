"""Read task YAML files into validated ``TaskSpec`` models, with file positions in errors.

Called by the CLI (``task submit -f``) and usable from the SDK. A file holds one task (a
mapping of TaskSpec fields), or a batch: a YAML list of tasks, several ``---`` documents, or a
mapping ``{tasks: [...]}``. Every problem in every task is reported at once as
``FILE:LINE: task 'NAME': problem`` lines in one ``InvalidInput``; YAML syntax errors carry
``FILE:LINE:COLUMN``. Nothing here talks to the hub.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import yaml
from pydantic import ValidationError

from fuyao.errors import InvalidInput
from fuyao.spec import CLIENT_CONTEXT, TaskSpec
from fuyaoctl.validation import Location, brief, problems

STDIN = "-"
MAX_ERRORS = 20


@dataclass(frozen=True, slots=True)
class TaskFile:
    """Tasks read from one source; ``batch`` is True for a list, several documents or ``tasks:``."""

    source: str
    specs: list[TaskSpec]
    batch: bool


def read_task_file(path: str, stdin: TextIO | None = None) -> TaskFile:
    """Read and validate the tasks in ``path`` (``-`` reads ``stdin``)."""
    if path == STDIN:
        return parse_task_file((stdin or sys.stdin).read(), "<stdin>")
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{path}: not a UTF-8 text file") from exc
    except OSError as exc:
        raise InvalidInput(f"cannot read {path}: {exc.strerror or exc}") from exc
    return parse_task_file(text, path)


def parse_task_file(text: str, source: str) -> TaskFile:
    """Validate the tasks in YAML ``text``; ``source`` names the file in messages."""
    documents = _load(text, source)
    batch = len(documents) > 1
    entries: list[tuple[yaml.Node, Any]] = []
    for node, data in documents:
        batch = batch or isinstance(data, list) or _is_batch_mapping(data)
        entries.extend(_tasks_in(node, data, source))
    if not entries:
        raise InvalidInput(f"{source}: no tasks found")
    specs, errors = _validate(entries, source)
    errors.extend(_duplicates(entries, source))
    if errors:
        shown = [e if len(e) <= 500 else e[:500] + "..." for e in errors[:MAX_ERRORS]]
        if len(errors) > MAX_ERRORS:
            shown.append(f"... and {len(errors) - MAX_ERRORS} more problems")
        raise InvalidInput("\n".join(shown))
    return TaskFile(source=source, specs=specs, batch=batch)


def _validate(
    entries: list[tuple[yaml.Node, Any]], source: str
) -> tuple[list[TaskSpec], list[str]]:
    """Each entry as a TaskSpec, and one ``FILE:LINE: task: problem`` line per problem."""
    specs: list[TaskSpec] = []
    errors: list[str] = []
    for index, (node, data) in enumerate(entries, start=1):
        label = _label(data, index)
        if not isinstance(data, dict):
            errors.append(f"{source}:{node.start_mark.line + 1}: {label}: "
                          f"expected a mapping of task fields, found {brief(data)}")
            continue
        try:
            specs.append(TaskSpec.model_validate(data, context=CLIENT_CONTEXT))
        except ValidationError as exc:
            errors.extend(f"{source}:{_line(node, loc)}: {label}: {problem}"
                          for loc, problem in problems(TaskSpec, exc))
    return specs, errors


def _load(text: str, source: str) -> list[tuple[yaml.Node, Any]]:
    """Every non-empty YAML document as (node, data), keeping nodes for line numbers."""
    loader = yaml.SafeLoader(text)
    documents: list[tuple[yaml.Node, Any]] = []
    try:
        while loader.check_node():
            node = loader.get_node()
            data = loader.construct_document(node)
            if node is not None and data is not None:
                documents.append((node, data))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f":{mark.line + 1}:{mark.column + 1}" if mark else ""
        problem = exc.problem or exc.context or "syntax error"
        raise InvalidInput(f"{source}{where}: invalid YAML: {problem}") from exc
    except yaml.YAMLError as exc:
        raise InvalidInput(f"{source}: invalid YAML: {exc}") from exc
    finally:
        loader.dispose()
    return documents


def _is_batch_mapping(data: Any) -> bool:
    return isinstance(data, dict) and "tasks" in data


def _tasks_in(node: yaml.Node, data: Any, source: str) -> Iterator[tuple[yaml.Node, Any]]:
    """The (node, mapping) of each task one document holds."""
    line = node.start_mark.line + 1
    if _is_batch_mapping(data):
        extra = sorted(str(key) for key in data if key != "tasks")
        if extra:
            raise InvalidInput(
                f"{source}:{line}: a batch mapping holds only 'tasks', found {', '.join(extra)}"
            )
        node, data = _child(node, "tasks"), data["tasks"]
        if not isinstance(data, list):
            raise InvalidInput(f"{source}:{line}: 'tasks' must be a list of tasks")
    if isinstance(data, list):
        yield from zip(node.value, data, strict=True)
    elif isinstance(data, dict):
        yield node, data
    else:
        raise InvalidInput(
            f"{source}:{line}: expected a task (a mapping of fields), a list of tasks or "
            f"a mapping with 'tasks', found {type(data).__name__} {data!r}"
        )


def _child(node: yaml.Node, key: str | int) -> yaml.Node:
    """The value node under ``key`` of a mapping node, or item ``key`` of a sequence node."""
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.value == str(key):
                found: yaml.Node = value_node
                return found
    if isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
        item: yaml.Node = node.value[key]
        return item
    return node


def _line(node: yaml.Node, loc: Location) -> int:
    """1-based line of the value at ``loc`` under a task's node, as deep as the file goes."""
    line = node.start_mark.line
    for part in loc:
        child = _child(node, part)
        if child is node:
            break
        if isinstance(node, yaml.MappingNode):  # point at the key: unknown fields have no value
            line = next(k.start_mark.line for k, v in node.value if v is child)
        else:
            line = child.start_mark.line
        node = child
    return line + 1


def _label(data: Any, index: int) -> str:
    name = data.get("name") if isinstance(data, dict) else None
    return f"task {name!r}" if isinstance(name, str) and name else f"task #{index}"


def _duplicates(entries: list[tuple[yaml.Node, Any]], source: str) -> Iterator[str]:
    """A name used twice would make the hub refuse the whole batch: say so before sending."""
    first_line: dict[str, int] = {}
    for node, data in entries:
        name = data.get("name") if isinstance(data, dict) else None
        if not isinstance(name, str):
            continue
        line = _line(node, ("name",))
        if name in first_line:
            yield f"{source}:{line}: task {name!r}: name already used on line {first_line[name]}"
        else:
            first_line[name] = line
