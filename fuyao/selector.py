"""The selector language: ``gpu-model >= A100, gpu-memory >= 40Gi, arch in (amd64, arm64)``.

``parse_selector`` turns text into a ``Selector`` (cached, so callers may parse the same text
on every placement cycle); ``Selector.matches`` tests one node's normalized labels (see
``fuyao.labels``) and sits on the placement hot path, so every literal is converted at parse
time and each requirement is compiled into one small closure. Task specs, compute profiles,
the placement filter and ``fuyaoctl`` all go through here.

How values compare depends on the key (full rules in docs/concepts/labels-and-selectors.md):

- ``gpu-model`` / ``npu-model``: model names compare canonically (``a100`` = ``A100``,
  ``Tesla-V100-PCIE-16GB`` = ``V100``); ordered operators compare catalog ranks, of one kind.
- ``gpu-memory`` (MiB when bare, else ``40Gi``), ``gpu-count``: numbers, ``=`` included.
- ``gpu-node``, ``nvlink-enabled``: ``true`` or ``false``.
- any other key: ``=`` / ``in`` compare strings; ordered operators compare quantities.

A bad selector raises ``InvalidInput`` quoting the text and the column of the problem.
Matching never raises: a node value that cannot be compared does not match.
"""

from __future__ import annotations

import difflib
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from functools import lru_cache
from typing import NoReturn

from fuyao.catalog import DEFAULT_CATALOG, Catalog
from fuyao.errors import InvalidInput
from fuyao.labels import (
    ARCH,
    GPU_COUNT,
    GPU_MEMORY,
    GPU_MODEL,
    GPU_NODE,
    GPU_VENDOR,
    NPU_MODEL,
    NVLINK,
    PCIE_BANDWIDTH,
    PREFIX,
    REGION,
    SITE,
    plausible_number,
)
from fuyao.quantity import format_mib, parse_count, parse_memory_mib_label, parse_quantity

UNRANKED_MODEL = "is not a model the catalog ranks"
NO_RANK = "has no rank (undisclosed model): it cannot be ordered"
CATALOG_PROBLEMS = (UNRANKED_MODEL, NO_RANK)   # a hub's operated catalog may know better

OPERATORS = ("=", "!=", "in", "notin", ">=", ">", "<=", "<", "range", "exists", "!exists")
KEY_ALIASES: dict[str, str] = {
    "arch": ARCH,
    "os": "kubernetes.io/os",
    "hostname": "kubernetes.io/hostname",
    "zone": "topology.kubernetes.io/zone",
}
CANONICAL_KEYS = frozenset(
    {GPU_MODEL, GPU_MEMORY, GPU_COUNT, GPU_VENDOR, GPU_NODE, NVLINK, PCIE_BANDWIDTH, NPU_MODEL,
     SITE, REGION}
)
_MODEL_KINDS = {GPU_MODEL: "gpu", NPU_MODEL: "npu"}
_BOOL_KEYS = frozenset({GPU_NODE, NVLINK})
_NAME_KEYS = frozenset({GPU_VENDOR, SITE, REGION, ARCH})   # canonical keys holding names
_ORDERED: dict[str, Callable[[Decimal, Decimal], bool]] = {
    ">=": operator.ge, ">": operator.gt, "<=": operator.le, "<": operator.lt,
}
_KEY = re.compile(
    r"^(?:[a-z0-9](?:[-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
_RANGE = re.compile(r"^(.*?)\.\.(.*)$")

Labels = Mapping[str, str]
Matcher = Callable[[Labels], bool]


class _Problem(Exception):
    """What is wrong with one requirement; the parser adds the selector text and column."""


@dataclass(frozen=True, slots=True)
class Requirement:
    """One condition on one label key; construction normalizes key, values and a 1-value set."""

    key: str
    op: str
    values: tuple[str, ...] = ()
    catalog: Catalog = field(default=DEFAULT_CATALOG, repr=False, compare=False)
    _match: Matcher = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        try:
            key = _canonical_key(self.key)
            raw = (self.values,) if isinstance(self.values, str) else tuple(self.values)
            values = _normalize_values(key, self.op, raw, self.catalog)
            op = {"in": "=", "notin": "!="}.get(self.op, self.op) if len(values) == 1 else self.op
            object.__setattr__(self, "key", key)
            object.__setattr__(self, "op", op)
            object.__setattr__(self, "values", values)
            object.__setattr__(self, "_match", _compile(key, op, values, self.catalog))
        except _Problem as problem:
            raise InvalidInput(f'selector requirement "{_describe(self)}": {problem}') from problem

    def matches(self, labels: Labels, catalog: Catalog | None = None) -> bool:
        """Does a node with these labels satisfy this requirement? Never raises on node data.

        ``catalog`` defaults to the one the requirement was built with.
        """
        if catalog is None or catalog is self.catalog:
            return self._match(labels)
        return _compiled_for(self, catalog)(labels)

    def __str__(self) -> str:
        return _describe(self)

    def __reduce__(self) -> tuple[type[Requirement], tuple[str, str, tuple[str, ...], Catalog]]:
        # The compiled closure cannot be pickled; rebuilding recompiles it.
        return (Requirement, (self.key, self.op, self.values, self.catalog))


@dataclass(frozen=True, slots=True)
class Selector:
    """An AND of requirements; the empty selector matches every node."""

    requirements: tuple[Requirement, ...] = ()
    _text: str = field(init=False, repr=False, compare=False)   # str(self), written once
    keys: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # The canonical text is read on every placement decision (the scheduler's cache
        # keys): written once here, as parsed selectors are shared (``parse_selector``).
        object.__setattr__(self, "_text", ", ".join(str(r) for r in self.requirements))
        # The label keys the requirements read, each once, in order: every matcher reads
        # only ``labels.get(key)`` (or ``key in labels``) of its own key, so two label
        # mappings with the same values at these keys get the same verdict.
        object.__setattr__(self, "keys", tuple(dict.fromkeys(r.key for r in self.requirements)))

    def matches(self, labels: Labels) -> bool:
        """True when every requirement holds for these labels."""
        for requirement in self.requirements:  # noqa: SIM110 - a plain loop beats all() here
            if not requirement._match(labels):
                return False
        return True

    def unmet(self, labels: Labels) -> Requirement | None:
        """The first requirement these labels fail (for "no node with ..." reasons), or None."""
        for requirement in self.requirements:
            if not requirement._match(labels):
                return requirement
        return None

    def __str__(self) -> str:
        return self._text

    @property
    def empty(self) -> bool:
        """True when the selector has no requirement (it matches everything)."""
        return not self.requirements


MAX_SELECTOR_CHARS = 8192     # a task's whole effective selector
MAX_REQUIREMENTS = 64


@lru_cache(maxsize=4096)
def parse_selector(text: str, catalog: Catalog = DEFAULT_CATALOG) -> Selector:
    """Parse selector text; ``""`` is the empty selector. Raises ``InvalidInput``; at most
    ``MAX_SELECTOR_CHARS`` characters and ``MAX_REQUIREMENTS`` requirements."""
    if len(text) > MAX_SELECTOR_CHARS:
        raise InvalidInput(f"selector: longer than {MAX_SELECTOR_CHARS} characters")
    return _Parser(text, catalog).parse()


# --- keys and literal values -------------------------------------------------------------


def _canonical_key(key: str) -> str:
    key = key.strip()
    if "/" not in key:
        key = KEY_ALIASES.get(key, PREFIX + key)
    if not _KEY.match(key) or len(key) > 253:
        raise _Problem(f"{key!r} is not a valid label key")
    if key.startswith(PREFIX) and key not in CANONICAL_KEYS:
        names = sorted(k.removeprefix(PREFIX) for k in CANONICAL_KEYS)
        close = difflib.get_close_matches(key.removeprefix(PREFIX), names, n=1, cutoff=0.8)
        if close:
            raise _Problem(f"unknown key {key!r} (did you mean {PREFIX + close[0]!r}?)")
    return key


def _normalize_values(
    key: str, op: str, values: tuple[str, ...], catalog: Catalog
) -> tuple[str, ...]:
    """Check the operator's arity and write each literal in canonical form."""
    arity = {"exists": (0, 0), "!exists": (0, 0), "range": (2, 2), "in": (1, None),
             "notin": (1, None)}.get(op, (1, 1))
    if op not in OPERATORS:
        raise _Problem(f"unknown operator {op!r}")
    low, high = arity
    if len(values) < low or (high is not None and len(values) > high):
        want = f"{low}" if low == high else f"at least {low}"
        raise _Problem(f"operator {op!r} takes {want} value(s), got {len(values)}")
    if any(not v.strip() for v in values):
        what = f"range '{'..'.join(values)}' needs both ends" if op == "range" else "empty value"
        raise _Problem(what)
    raw = tuple(v.strip() for v in values)
    values = tuple(_normalize_literal(key, v, catalog) for v in raw)
    if op in ("in", "notin"):
        return tuple(sorted(set(values)))
    if op in _ORDERED or op == "range":
        pairs = zip(values, raw, strict=True)
        bounds = [_ordered_literal(key, value, catalog, shown) for value, shown in pairs]
        if op == "range" and bounds[0] > bounds[1]:
            raise _Problem(f"empty range {values[0]}..{values[1]}: the low end is above the high")
    return values


def _normalize_literal(key: str, value: str, catalog: Catalog) -> str:
    if key in _MODEL_KINDS:
        return catalog.canonical(value)[0] or value
    if key in _BOOL_KEYS:
        if value.lower() not in ("true", "false"):
            raise _Problem(f"{key} is 'true' or 'false', not {value!r}")
        return value.lower()
    if key in (GPU_MEMORY, GPU_COUNT):
        number = _number(key, value)
        if number is None:
            what = "memory size (e.g. 40Gi, 81920)" if key == GPU_MEMORY else "device count"
            raise _Problem(f"{value!r} is not a whole, non-negative {what}")
        return format_mib(int(number)) if key == GPU_MEMORY else str(number)
    return value


def _ordered_literal(key: str, value: str, catalog: Catalog, shown: str | None = None) -> Decimal:
    """The number an ordered comparison compares ``value`` by; a _Problem when there is none."""
    kind = _MODEL_KINDS.get(key)
    if kind is not None:
        model = catalog.get(value)
        if model is None:
            raise _Problem(f"{shown or value!r} {UNRANKED_MODEL}")
        if model.kind != kind:
            other = "npu-model" if model.kind == "npu" else "gpu-model"
            what = "an NPU" if model.kind == "npu" else "a GPU"
            raise _Problem(f"{model.name} is {what}: order it with {other}")
        if model.rank is None:
            raise _Problem(f"{model.name} {NO_RANK}")
        return Decimal(model.rank)
    if key in _BOOL_KEYS:
        raise _Problem(f"{key} is true/false and cannot be ordered")
    if key in _NAME_KEYS:
        raise _Problem(f"{key} holds names, which cannot be ordered (use = or in)")
    number = _number(key, value)
    if number is None:
        raise _Problem(f"{shown or value!r} is not a number or quantity, so it cannot be ordered")
    return number


# --- node values (never raise) ----------------------------------------------------------


@lru_cache(maxsize=8192)
def _number(key: str, value: str) -> Decimal | None:
    """A label value as a number: MiB for gpu-memory, a count for gpu-count, else a quantity."""
    if not plausible_number(value):
        return None
    try:
        if key == GPU_MEMORY:
            return Decimal(parse_memory_mib_label(value))
        if key == GPU_COUNT:
            return Decimal(parse_count(value))
        return parse_quantity(value)
    except (InvalidInput, ArithmeticError):  # decimal.Overflow is an ArithmeticError
        return None


def _equality_form(key: str, catalog: Catalog) -> Callable[[str], object]:
    """How a node value is written before it is compared with ``=`` / ``in`` literals."""
    if key in _MODEL_KINDS:
        return lambda value: catalog.canonical(value)[0]
    if key in _BOOL_KEYS:
        return str.lower
    if key in (GPU_MEMORY, GPU_COUNT):
        return lambda value: _number(key, value)
    return lambda value: value


def _order_form(key: str, catalog: Catalog) -> Callable[[str], Decimal | None]:
    """How a node value becomes a number for ordered operators (None: not comparable)."""
    kind = _MODEL_KINDS.get(key)
    if kind is None:
        return lambda value: _number(key, value)

    def rank(value: str) -> Decimal | None:
        model = catalog.get(catalog.canonical(value)[0])
        if model is None or model.kind != kind or model.rank is None:
            return None
        return Decimal(model.rank)

    return rank


# --- compilation ------------------------------------------------------------------------


def _compile(key: str, op: str, values: tuple[str, ...], catalog: Catalog) -> Matcher:
    """One closure testing a label mapping; literals are converted here, once."""
    if op == "exists":
        return lambda labels: key in labels
    if op == "!exists":
        return lambda labels: key not in labels
    if op in _ORDERED or op == "range":
        return _compile_ordered(key, op, values, catalog)
    form = _equality_form(key, catalog)
    wanted = frozenset(
        _number(key, v) if key in (GPU_MEMORY, GPU_COUNT) else v for v in values
    )
    negate = op in ("!=", "notin")

    def match(labels: Labels) -> bool:
        value = labels.get(key)
        if value is None:
            return negate
        if value in wanted:
            return not negate
        written = form(value)
        if written is None:
            return False
        return (written in wanted) != negate

    return match


def _compile_ordered(key: str, op: str, values: tuple[str, ...], catalog: Catalog) -> Matcher:
    form = _order_form(key, catalog)
    bounds = [_ordered_literal(key, v, catalog) for v in values]
    if op == "range":
        low, high = bounds

        def in_range(labels: Labels) -> bool:
            value = labels.get(key)
            number = None if value is None else form(value)
            return number is not None and low <= number <= high

        return in_range
    compare, bound = _ORDERED[op], bounds[0]

    def ordered(labels: Labels) -> bool:
        value = labels.get(key)
        number = None if value is None else form(value)
        return number is not None and compare(number, bound)

    return ordered


@lru_cache(maxsize=256)
def _compiled_for(requirement: Requirement, catalog: Catalog) -> Matcher:
    """A requirement compiled against another catalog (``Requirement.matches(.., catalog)``)."""
    try:
        return _compile(requirement.key, requirement.op, requirement.values, catalog)
    except _Problem as problem:
        raise InvalidInput(f'selector requirement "{requirement}": {problem}') from problem


def _describe(requirement: Requirement) -> str:
    key, op, values = requirement.key, requirement.op, requirement.values
    if op == "exists":
        return key
    if op == "!exists":
        return f"!{key}"
    if op in ("in", "notin"):
        return f"{key} {op} ({', '.join(values)})"
    if op == "range" and len(values) == 2:
        return f"{key}={values[0]}..{values[1]}"
    if op == "=" and len(values) == 1 and ".." in values[0]:
        return f"{key} in ({values[0]})"  # "key=a..b" would read back as a range
    return f"{key}{op}{','.join(values)}"


# --- parsing ----------------------------------------------------------------------------

_TOKEN = re.compile(
    r"\s*(?:(?P<op>==|!=|>=|<=|=|>|<)|(?P<bang>!)|(?P<open>\()|(?P<close>\))|(?P<comma>,)"
    r"|(?P<word>[^\s,()=!<>]+))"
)


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # op, bang, open, close, comma, word, end
    text: str
    column: int  # 1-based


class _Parser:
    """Recursive descent over the token list; one instance per parse."""

    def __init__(self, text: str, catalog: Catalog) -> None:
        self.text = text
        self.catalog = catalog
        self.tokens = self._tokenize()
        self.at = 0

    def parse(self) -> Selector:
        if self._peek().kind == "end":
            return Selector()
        requirements = [self._requirement()]
        while self._peek().kind == "comma":
            if len(requirements) >= MAX_REQUIREMENTS:
                self._fail(f"more than {MAX_REQUIREMENTS} requirements", self._peek())
            self.at += 1
            if self._peek().kind in ("comma", "end"):
                self._fail("empty requirement after ','", self._peek())
            requirements.append(self._requirement())
        token = self._peek()
        if token.kind != "end":
            hint = ("a range has no spaces: key = low..high" if ".." in token.text
                    else "requirements are separated by ','")
            self._fail(f"unexpected {_show(token)} after '{requirements[-1]}' ({hint})", token)
        return Selector(tuple(requirements))

    def _requirement(self) -> Requirement:
        first = self._next()
        if first.kind == "bang":
            key = self._expect_word("missing key after '!'")
            return self._build(key.text, "!exists", (), first)
        if first.kind != "word":
            self._fail(f"expected a label key, found {_show(first)}", first)
        following = self._peek()
        if following.kind in ("comma", "end"):
            return self._build(first.text, "exists", (), first)
        if following.kind == "op":
            self.at += 1
            value = self._expect_word(f"missing value after {following.text!r}")
            op = "=" if following.text == "==" else following.text
            bounds = _RANGE.match(value.text) if op == "=" else None
            if bounds:
                return self._build(first.text, "range", bounds.groups(), value)
            return self._build(first.text, op, (value.text,), value)
        if following.kind == "word" and following.text.lower() in ("in", "notin"):
            self.at += 1
            return self._build(first.text, following.text.lower(), self._set(following), first)
        self._fail(f"expected an operator after key {first.text!r}, found {_show(following)}",
                   following)

    def _set(self, keyword: _Token) -> tuple[str, ...]:
        opening = self._next()
        if opening.kind != "open":
            hint = " (a range is written key = low..high)" if ".." in opening.text else ""
            self._fail(f"expected '(' after '{keyword.text}'{hint}", opening)
        values = [self._expect_word(f"missing value in '{keyword.text} (...)'").text]
        while self._peek().kind == "comma":
            self.at += 1
            values.append(self._expect_word(f"missing value after ',' in '{keyword.text} (...)'")
                          .text)
        closing = self._next()
        if closing.kind != "close":
            self._fail(f"expected ',' or ')' in '{keyword.text} (...)', found {_show(closing)}",
                       closing)
        return tuple(values)

    def _build(self, key: str, op: str, values: tuple[str, ...], where: _Token) -> Requirement:
        try:
            return Requirement(key, op, values, self.catalog)
        except InvalidInput as exc:
            cause = exc.__cause__
            message = str(cause) if isinstance(cause, _Problem) else exc.message
        self._fail(message, where)

    def _expect_word(self, message: str) -> _Token:
        token = self._next()
        if token.kind != "word":
            self._fail(message, token)
        return token

    def _peek(self) -> _Token:
        return self.tokens[self.at]

    def _next(self) -> _Token:
        token = self.tokens[self.at]
        if token.kind != "end":
            self.at += 1
        return token

    def _fail(self, message: str, token: _Token) -> NoReturn:
        raise InvalidInput(f'selector "{self.text}": {message} (column {token.column})')

    def _tokenize(self) -> list[_Token]:
        tokens: list[_Token] = []
        position = 0
        text = self.text
        while position < len(text):
            match = _TOKEN.match(text, position)
            if match is None or match.lastgroup is None:
                break  # only whitespace is left: every other character starts a token
            kind = match.lastgroup
            tokens.append(_Token(kind, match.group(kind), match.start(kind) + 1))
            position = match.end()
        tokens.append(_Token("end", "", len(text) + 1))
        return tokens


def _show(token: _Token) -> str:
    return "the end" if token.kind == "end" else repr(token.text)
