"""hub.native: the engine runs compiled only from extensions of the sources as they are now."""

from __future__ import annotations

import ast
import importlib
import importlib.machinery
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import hub.native as native
from hub.native import SourceFinder, decide, digest

MODULES = ("hub.alpha", "hub.sub.beta")   # in a tmp tree, not the real package
SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """Two sources, each with an 'extension' beside it, and a manifest of them."""
    for module in MODULES:
        source = native.source_of(module, tmp_path)
        source.parent.mkdir(parents=True, exist_ok=True)
        source.write_text(f"NAME = {module!r}\n")
        source.with_name(source.stem + SUFFIX).write_bytes(b"not really an extension")
    manifest = tmp_path / "native.json"
    manifest.write_text(json.dumps(
        {"modules": {m: digest(native.source_of(m, tmp_path)) for m in MODULES}}))
    return tmp_path


def state(root: Path, **env: str) -> native.State:
    return decide(MODULES, root, env, root / "native.json")


def test_extensions_of_the_current_sources_run_compiled(tree: Path) -> None:
    assert state(tree) == native.State(True, "")
    assert str(state(tree)) == "compiled (mypyc)"


def test_an_edited_source_runs_every_module_from_source(tree: Path) -> None:
    beta = native.source_of("hub.sub.beta", tree)
    beta.write_text(beta.read_text() + "EDITED = True\n")
    got = state(tree)
    assert not got.compiled
    assert got.reason == ("hub/sub/beta.py changed since it was compiled: "
                          "run scripts/compile.sh")


@pytest.mark.parametrize("env", [{"FUYAO_PURE": "1"}, {"FUYAO_PURE": "yes"}])
def test_fuyao_pure_runs_the_source(tree: Path, env: dict[str, str]) -> None:
    assert state(tree, **env) == native.State(False, "FUYAO_PURE is set")
    assert state(tree, FUYAO_PURE="0").compiled


def test_a_missing_extension_or_manifest_runs_the_source(tree: Path) -> None:
    (tree / "native.json").write_text("{not json")
    assert "unreadable" in state(tree).reason
    (tree / "native.json").unlink()
    assert "missing" in state(tree).reason
    assert not state(tree).compiled


def test_one_module_without_its_extension_runs_all_from_source(tree: Path) -> None:
    for path in native.extensions_of("hub.alpha", tree):
        path.unlink()
    got = state(tree)
    assert got == native.State(False, "hub.alpha has no extension: run scripts/compile.sh")


def test_nothing_compiled_says_so(tmp_path: Path) -> None:
    for module in MODULES:
        native.source_of(module, tmp_path).parent.mkdir(parents=True, exist_ok=True)
        native.source_of(module, tmp_path).write_text("")
    assert state(tmp_path) == native.State(False, "not compiled: run scripts/compile.sh")


def test_a_module_compiled_then_dropped_from_the_list_runs_all_from_source(tree: Path) -> None:
    gamma = native.source_of("hub.gamma", tree)
    gamma.write_text("")
    gamma.with_name("gamma" + SUFFIX).write_bytes(b"left from an earlier build")
    assert native.compiled_under(tree) == ["hub.alpha", "hub.gamma", "hub.sub.beta"]
    assert state(tree) == native.State(
        False, "hub.gamma is compiled but not in hub.native.MODULES: run scripts/compile.sh")


PACKAGE = ("pkg.alpha", "pkg.sub.beta")


@pytest.fixture
def importable(tmp_path: Path) -> Iterator[Path]:
    """A package ``pkg`` whose modules have an 'extension' beside each source."""
    for module in PACKAGE:
        source = native.source_of(module, tmp_path)
        source.parent.mkdir(parents=True, exist_ok=True)
        source.write_text(f"NAME = {module!r}\n")
        source.with_name(source.stem + SUFFIX).write_bytes(b"not really an extension")
    sys.path.insert(0, str(tmp_path))
    try:
        yield tmp_path
    finally:
        sys.path.remove(str(tmp_path))
        for name in [n for n in sys.modules if n == "pkg" or n.startswith("pkg.")]:
            del sys.modules[name]
        sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, SourceFinder)]
        importlib.invalidate_caches()


def test_the_source_finder_loads_sources_ahead_of_their_extensions(importable: Path) -> None:
    with pytest.raises(ImportError):   # the 'extension' comes first, and is not one
        importlib.import_module("pkg.alpha")
    sys.meta_path.insert(0, SourceFinder(PACKAGE))
    alpha = importlib.import_module("pkg.alpha")
    beta = importlib.import_module("pkg.sub.beta")
    assert (alpha.NAME, beta.NAME) == PACKAGE
    assert beta.__file__ == str(native.source_of("pkg.sub.beta", importable))


def engine_file(env: dict[str, str]) -> str:
    code = ("import hub.placement.scheduler as s, hub.fleet.fit as f, hub.native as n; "
            "print(s.__file__, f.__file__, n.STATE.compiled)")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True, timeout=60)
    return out.stdout


def test_the_hub_loads_the_engine_as_its_state_says() -> None:
    """In a fresh interpreter: FUYAO_PURE loads every engine module from source; without
    it, extensions exactly when the state says compiled (``scripts/setup.sh`` compiles)."""
    env = {k: v for k, v in os.environ.items() if k != "FUYAO_PURE"}
    pure = engine_file({**env, "FUYAO_PURE": "1"}).split()
    assert pure[0].endswith("scheduler.py") and pure[1].endswith("fit.py")
    assert pure[2] == "False"
    scheduler, fit, compiled = engine_file(env).split()
    assert compiled == str(native.decide(env=env).compiled)
    assert scheduler.endswith(".py") is (compiled == "False")
    assert fit.endswith(".py") is (compiled == "False")


def test_no_compiled_class_has_a_weak_reference_slot() -> None:
    """mypyc (CPython 3.11) frees a weak reference to a compiled object with a ``__dict__``
    when the object dies: the collector crashes on it later. Such classes - an ABC's
    subclasses - live in modules that are not compiled (``hub.native``)."""
    if not native.STATE.compiled:
        pytest.skip(f"the engine runs from source: {native.STATE.reason}")
    broken = [f"{module}.{name}" for module in native.MODULES
              for name, cls in vars(importlib.import_module(module)).items()
              if isinstance(cls, type) and cls.__module__ == module
              and "__internal_mypyc_setup" in cls.__dict__ and cls.__weakrefoffset__]
    assert broken == []


def test_every_module_constant_of_the_engine_is_final() -> None:
    """A compiled module reads a module-level name through its dictionary (a lookup each
    time) unless the name is ``Final`` (a constant compiled in, or a C static): the
    engine's constants - limits, shared statuses, read per cluster judged - all are."""
    plain = []
    for module in native.MODULES:
        tree = ast.parse(native.source_of(module).read_text())
        for node in tree.body:
            typevar = (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                       and getattr(node.value.func, "id", "") == "TypeVar")
            if isinstance(node, ast.Assign) and not typevar:
                plain += [f"{module}.{t.id}" for t in node.targets if isinstance(t, ast.Name)
                          and t.id.lstrip("_").isupper()]
    assert plain == []


WEAKLY_HELD = """
import gc, weakref
from hub.fleet.readonly import NodeLabels, NumberedIds
from hub.placement.lent import Journal, LentStatuses, Statuses
held = []
for make in (lambda: NumberedIds("n1", 0, 8), lambda: NodeLabels({}, frozenset(), frozenset(), ()),
             lambda: LentStatuses([], {}, Journal()), Journal, Statuses):
    for _ in range(200):
        try:
            held.append(weakref.ref(make()))
        except TypeError:   # no weak reference to it: nothing to free wrongly
            break
gc.collect()
print(sum(ref() is None for ref in held))
"""


def test_objects_of_the_engine_die_under_weak_references_without_a_crash() -> None:
    """What crashed the compiled suite: hypothesis's weak references to engine objects it
    built (in a fresh interpreter, so a crash fails the test rather than the run)."""
    out = subprocess.run([sys.executable, "-c", WEAKLY_HELD], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    assert int(out.stdout) == 400   # Journal and Statuses: weakly held by design, and freed
