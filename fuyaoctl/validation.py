"""Client-side validation: build fuyao.spec models from user data, explain what is wrong.

The SDK (``client.py``) validates every request body with the same pydantic models the hub
uses before sending it; ``taskfile.py`` does the same for task files and adds file positions.
A pydantic ``ValidationError`` becomes ``InvalidInput`` whose message names each bad field
and its value, so nothing malformed ever leaves the client.
"""

from __future__ import annotations

import difflib
import reprlib
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from fuyao.errors import InvalidInput
from fuyao.spec import CLIENT_CONTEXT

Location = tuple[str | int, ...]
ModelT = TypeVar("ModelT", bound=BaseModel)


def validate_model(model: type[ModelT], data: ModelT | Mapping[str, Any], *, what: str) -> ModelT:
    """``data`` as ``model``, or ``InvalidInput("<what>: <problems>")`` naming every bad field.
    Accelerator models are left to the hub, whose catalog may have more than the built-in one
    (``fuyao.spec.CLIENT_CONTEXT``)."""
    if isinstance(data, model):
        return data
    if not isinstance(data, Mapping):
        raise InvalidInput(f"{what}: expected a mapping of fields, got {type(data).__name__}")
    try:
        return model.model_validate(dict(data), context=CLIENT_CONTEXT)
    except ValidationError as exc:
        texts = [text for _, text in problems(model, exc)]
        raise InvalidInput(f"{what}: " + "; ".join(texts)) from exc


def problems(model: type[BaseModel], exc: ValidationError) -> list[tuple[Location, str]]:
    """One ``(location, message)`` per bad top-level field, in the order pydantic found them.

    A value that fails every member of a union (``cpu: [1]``) yields one message, not one per
    member; an unknown field suggests the closest known one.
    """
    groups: dict[str | int | None, list[ErrorDetails]] = {}
    for error in exc.errors():
        groups.setdefault(error["loc"][0] if error["loc"] else None, []).append(error)
    return [_describe(model, errors) for errors in groups.values()]


_BRIEF = reprlib.Repr()
_BRIEF.maxstring = _BRIEF.maxother = 60
_BRIEF.maxlist = _BRIEF.maxdict = _BRIEF.maxtuple = 4
_BRIEF.maxlevel = 2


def brief(value: Any) -> str:
    """A short repr of user input for an error message: never the whole of a huge value
    (a YAML alias bomb expands to megabytes)."""
    return _BRIEF.repr(value)


def _describe(model: type[BaseModel], errors: list[ErrorDetails]) -> tuple[Location, str]:
    first = errors[0]
    loc: Location = tuple(first["loc"])
    if len(errors) > 1:
        return loc[:1], f"{loc[0]}: invalid value {brief(first['input'])}"
    where = ".".join(str(part) for part in loc)
    kind = first["type"]
    if kind == "extra_forbidden":
        return loc, f"unknown field {where!r}{_suggest(model, str(loc[-1]))}"
    if kind == "missing":
        return loc, f"{where}: required field is missing"
    message = first["msg"].removeprefix("Value error, ")
    if kind != "value_error":  # our own validators already quote the value
        message = f"{message} (got {brief(first['input'])})"
    return loc, f"{where}: {message}" if where else message


def _suggest(model: type[BaseModel], name: str) -> str:
    known = list(model.model_fields)
    close = difflib.get_close_matches(name, known, n=1)
    if close:
        return f" (did you mean {close[0]!r}?)"
    return f" (known fields: {', '.join(known)})"
