"""The placement engine compiled with mypyc, or run as its Python source: which, and why.

``MODULES`` - the fleet index, the fit search, the scheduler and its caches, the plugins
every decision runs - are plain typed Python. ``scripts/compile.sh`` (``python -m
hub.native build``) compiles them with mypyc into C extensions beside their sources (one
shared library, ``hub/native_engine__mypyc``, and a small extension per module) and writes
``MANIFEST``: each source's SHA-256 as compiled. Compiled, a placement decision, a
reservation and a node report's refile take about half the CPU (``docs/native.md``).

Python imports an extension in preference to the source beside it, so an edited source
with its old extension would run the old code. ``use()`` - run when the ``hub`` package is
imported, before any of ``MODULES`` - therefore loads every module of ``MODULES`` from its
source, all of them together (compiled modules call each other directly: one on its source
and the rest compiled would still run the old code of that one), when

- ``FUYAO_PURE=1`` is set (measuring against the source, or stepping through it), or
- a source differs from what was compiled, or an extension or the manifest is missing (a
  warning names the first such module: run ``scripts/compile.sh``).

``STATE`` says which was chosen and why (the hub logs it at start; benches report it).
Without a C compiler, or without mypy, nothing is compiled and the source runs: the same
decisions, at the source's speed.

One rule for the compiled modules' classes: on CPython 3.11 mypyc gives a compiled class
derived from a Python class (``Mapping``, ``Sequence``) a ``__dict__`` and a weak-reference
slot, and treats that slot as a reference the object owns - once an object something
referred to weakly dies, the weak reference itself is freed under whoever holds it, and the
collector crashes on it later (hypothesis keeps weak references to what it builds). Such
classes, and the classes the engine refers to weakly, live in modules outside ``MODULES``
(``hub.fleet.readonly``, ``hub.placement.lent``); ``tests/unit/test_native.py`` fails on a
compiled class that breaks the rule.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

MODULES: tuple[str, ...] = (
    "hub.fleet.cluster",
    "hub.fleet.fit",
    "hub.fleet.nodes",
    "hub.fleet.view",
    "hub.placement.bestfirst",
    "hub.placement.cache",
    "hub.placement.cyclestate",
    "hub.placement.ranking",
    "hub.placement.request",
    "hub.placement.scheduler",
    "hub.placement.plugins.accelerator_fit",
    "hub.placement.plugins.cluster_affinity",
    "hub.placement.plugins.cluster_ready",
    "hub.placement.plugins.cluster_weight",
    "hub.placement.plugins.fleet_reservation",
    "hub.placement.plugins.headroom",
    "hub.placement.plugins.least_overqualified",
    "hub.placement.plugins.node_fit",
    "hub.placement.plugins.taint_toleration",
)
GROUP = "hub.native_engine"          # the shared library: hub/native_engine__mypyc.*.so
ROOT = Path(__file__).resolve().parent.parent   # the directory holding the hub package
MANIFEST = ROOT / "hub" / "native.json"
PURE_ENV = "FUYAO_PURE"


@dataclass(frozen=True)
class State:
    """Whether ``MODULES`` run compiled, and the reason when they do not."""

    compiled: bool
    reason: str

    def __str__(self) -> str:
        return "compiled (mypyc)" if self.compiled else f"Python source ({self.reason})"


def source_of(module: str, root: Path = ROOT) -> Path:
    """The ``.py`` file of a dotted module name under ``root``."""
    return root.joinpath(*module.split(".")).with_suffix(".py")


def extensions_of(module: str, root: Path = ROOT) -> list[Path]:
    """The compiled extension files of a module found beside its source (any ABI tag)."""
    source = source_of(module, root)
    leaf = source.stem
    return [p for suffix in importlib.machinery.EXTENSION_SUFFIXES
            if (p := source.with_name(leaf + suffix)).exists()]


def compiled_under(root: Path = ROOT) -> list[str]:
    """Every module under ``root``'s hub package with an extension file (the shared library
    aside): a module dropped from ``MODULES`` after it was compiled is still one."""
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    found = []
    for path in (root / "hub").rglob("*.so"):
        name = path.name
        for suffix in suffixes:
            if name.endswith(suffix) and "__mypyc" not in name:
                parts = path.relative_to(root).parent.parts
                found.append(".".join((*parts, name[: -len(suffix)])))
                break
    return sorted(found)


def digest(path: Path) -> str:
    """SHA-256 of a file's bytes, hex."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def decide(modules: Sequence[str] = MODULES, root: Path = ROOT,
           env: Mapping[str, str] = os.environ, manifest: Path | None = None) -> State:
    """Whether ``modules`` may run compiled: every one has an extension, compiled from the
    source as it is now (by the manifest), and ``FUYAO_PURE`` is not set."""
    manifest = MANIFEST if manifest is None else manifest
    if env.get(PURE_ENV, "") not in ("", "0"):
        return State(False, f"{PURE_ENV} is set")
    have = [m for m in modules if extensions_of(m, root)]
    if not have:
        return State(False, "not compiled: run scripts/compile.sh")
    try:
        kept = json.loads(manifest.read_text())["modules"]
    except (OSError, ValueError, KeyError, TypeError):
        return State(False, f"{manifest.name} is missing or unreadable: run scripts/compile.sh")
    stray = sorted(set(compiled_under(root)) - set(modules))
    if stray:
        return State(False, f"{stray[0]} is compiled but not in hub.native.MODULES: "
                            "run scripts/compile.sh")
    for module in modules:
        if module not in have:
            return State(False, f"{module} has no extension: run scripts/compile.sh")
        if not isinstance(kept, dict) or kept.get(module) != digest(source_of(module, root)):
            return State(False, f"{source_of(module, root).relative_to(root)} changed since "
                                "it was compiled: run scripts/compile.sh")
    return State(True, "")


class SourceFinder(importlib.abc.MetaPathFinder):
    """Finds the named modules' ``.py`` files, ahead of the extensions beside them."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = frozenset(names)

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.names or not path:
            return None
        leaf = fullname.rpartition(".")[2] + ".py"
        for entry in path:
            source = Path(entry) / leaf
            if source.is_file():
                return importlib.util.spec_from_file_location(fullname, source)
        return None


def use() -> State:
    """Decide, and when the source must run while extensions are there, put a
    ``SourceFinder`` for ``MODULES`` first on ``sys.meta_path`` (once)."""
    state = decide()
    if not state.compiled and any(extensions_of(m) for m in MODULES):
        if not any(isinstance(f, SourceFinder) for f in sys.meta_path):
            sys.meta_path.insert(0, SourceFinder((*MODULES, *compiled_under())))
        if not state.reason.startswith(PURE_ENV):
            warnings.warn(f"placement engine runs from source: {state.reason}",
                          RuntimeWarning, stacklevel=2)
    return state


STATE = use()


# -- building: python -m hub.native build | clean | status --------------------------------

def clean(root: Path = ROOT) -> list[Path]:
    """Remove every compiled module under hub (``MODULES``, and any dropped from it), the
    shared library and the manifest."""
    gone = [p for m in compiled_under(root) for p in extensions_of(m, root)]
    lib = root / "hub"
    gone += [p for p in lib.glob(GROUP.rpartition(".")[2] + "__mypyc*")
             if p.suffix in (".so", ".pyd")]
    if MANIFEST.exists():
        gone.append(MANIFEST)
    for path in gone:
        path.unlink()
    return gone


def build(root: Path = ROOT) -> int:
    """Compile ``MODULES`` in place (C sources and objects under ``build/native``), then
    write the manifest; 0 on success. The build's own output goes to
    ``build/native/build.log``."""
    clean(root)
    work = root / "build" / "native"
    work.mkdir(parents=True, exist_ok=True)
    log = work / "build.log"
    sources = {m: source_of(m, root) for m in MODULES}
    digests = {m: digest(p) for m, p in sources.items()}   # as read before compiling
    try:
        from mypyc.build import mypycify
        from setuptools import setup  # type: ignore[import-untyped]
    except ImportError as exc:
        print(f"hub.native: cannot compile ({exc}); the engine runs from source", file=sys.stderr)
        return 1
    here = Path.cwd()
    os.chdir(root)
    fd = os.dup(1), os.dup(2)
    try:
        with log.open("w") as out:
            os.dup2(out.fileno(), 1)
            os.dup2(out.fileno(), 2)
            try:
                setup(name="fuyao-native", script_args=[
                    "-q", "build_ext", "--inplace", "--build-temp", str(work / "temp")],
                    ext_modules=mypycify([str(p.relative_to(root)) for p in sources.values()],
                                         opt_level="3", group_name=GROUP,
                                         target_dir=str(work / "c")))
                ok = True
            except (SystemExit, Exception) as exc:   # setuptools exits on a compile error
                print(f"hub.native: build failed: {exc!r}", file=out)
                ok = False
    finally:
        os.dup2(fd[0], 1)
        os.dup2(fd[1], 2)
        os.close(fd[0])
        os.close(fd[1])
        os.chdir(here)
    if not ok or not all(extensions_of(m, root) for m in MODULES):
        clean(root)
        print(f"hub.native: compiling failed (see {log}); the engine runs from source",
              file=sys.stderr)
        return 1
    MANIFEST.write_text(json.dumps({"modules": digests}, indent=1, sort_keys=True) + "\n")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``build`` (always), ``ensure`` (build unless current), ``clean``, ``status``."""
    args = list(sys.argv[1:] if argv is None else argv)
    command = args[0] if args else "status"
    if command == "status":
        print(decide())
        return 0
    if command == "clean":
        for path in clean():
            print(f"removed {path.relative_to(ROOT)}")
        return 0
    if command == "ensure" and decide(env={}).compiled:
        print("placement engine: compiled, current")
        return 0
    if command in ("build", "ensure"):
        print(f"compiling the placement engine ({len(MODULES)} modules, mypyc; "
              "about a minute)", flush=True)
        code = build()
        if code == 0:
            print("placement engine: compiled (mypyc)")
        return code
    print(f"usage: python -m hub.native [status|build|ensure|clean], not {command!r}",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
