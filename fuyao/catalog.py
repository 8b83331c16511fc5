"""The accelerator catalog: canonical model names, vendors, ranks and default memory.

Label normalization (``fuyao.labels``) turns whatever product string a node carries
(``Tesla-V100-PCIE-16GB``, ``NVIDIA-H100-80GB-HBM3``, ``910B3``, the trace's ``V100M32``)
into one canonical model with ``Catalog.canonical``; the selector language
(``fuyao.selector``) orders models by ``rank`` so ``gpu-model >= A100`` means "A100 or
better". The hub, the agents and the CLI all use ``DEFAULT_CATALOG`` unless an operator
extends its alias table with ``Catalog.with_aliases``.

Ranks order models of one kind only: GPUs among GPUs, NPUs among NPUs. Both scales start
at 10, so a GPU rank and an NPU rank must never be compared; the selector refuses to.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from fuyao.errors import InvalidInput

UNKNOWN_VENDOR = "unknown"
_MEMO_LIMIT = 4096


@dataclass(frozen=True, slots=True)
class AcceleratorModel:
    """One accelerator model: canonical name, vendor, kind, rank and nominal memory."""

    name: str
    vendor: str
    kind: str
    rank: int | None
    memory_mib: int


_GIB = 1024

DEFAULT_MODELS: tuple[AcceleratorModel, ...] = (
    # NVIDIA GPUs, ranked roughly by training throughput of the usual SKU.
    AcceleratorModel("T4", "nvidia", "gpu", 10, 16 * _GIB),
    AcceleratorModel("P100", "nvidia", "gpu", 20, 16 * _GIB),
    AcceleratorModel("V100", "nvidia", "gpu", 30, 16 * _GIB),
    AcceleratorModel("A10", "nvidia", "gpu", 40, 24 * _GIB),
    AcceleratorModel("A30", "nvidia", "gpu", 50, 24 * _GIB),
    AcceleratorModel("L4", "nvidia", "gpu", 60, 24 * _GIB),
    AcceleratorModel("A100", "nvidia", "gpu", 70, 40 * _GIB),
    AcceleratorModel("L40S", "nvidia", "gpu", 80, 48 * _GIB),
    AcceleratorModel("H100", "nvidia", "gpu", 90, 80 * _GIB),
    AcceleratorModel("H200", "nvidia", "gpu", 100, 141 * _GIB),
    AcceleratorModel("B200", "nvidia", "gpu", 110, 180 * _GIB),
    # Huawei Ascend NPUs, ranked among themselves only.
    AcceleratorModel("310P", "huawei", "npu", 10, 24 * _GIB),
    AcceleratorModel("910A", "huawei", "npu", 20, 32 * _GIB),
    AcceleratorModel("910B", "huawei", "npu", 30, 64 * _GIB),
    # The public trace's undisclosed models: GPUs of unknown vendor, no order, no memory.
    AcceleratorModel("G1", UNKNOWN_VENDOR, "gpu", None, 0),
    AcceleratorModel("G2", UNKNOWN_VENDOR, "gpu", None, 0),
    AcceleratorModel("G3", UNKNOWN_VENDOR, "gpu", None, 0),
)

# Vendor words dropped from the front of a product string before it is cleaned.
_VENDOR_WORDS = frozenset({"nvidia", "tesla", "huawei"})
# Product strings split into words on these; '.' is kept (MIG profiles like "1g.5gb").
_SEPARATORS = re.compile(r"[\s\-_/:]+")
# "16GB", "80G", "32GiB", "24Gi": device memory written into a product string.
_MEMORY_WORD = re.compile(r"^(\d{1,4})(?:gb|g|gib|gi)$")
# The trace's "V100M32": a model word with the memory in GiB glued on after an 'm'.
_TRACE_WORD = re.compile(r"^([a-z0-9]+?)m(\d{1,4})$")
# Close variants of a catalog model that GFD reports under their own names.
_VARIANT_WORDS = {"a10g": "A10", "v100s": "V100", "a800": "A100", "h800": "H100"}
# Ascend chip names as the Ascend device plugin reports them (npu.chip.name), lowercased.
_ASCEND_WORDS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^910b\d?$"), "910B"),
    (re.compile(r"^910(?:a|premiuma|proa|prob)$"), "910A"),
    (re.compile(r"^310p\d?$"), "310P"),
)
_LABEL_VALUE_JUNK = re.compile(r"[^A-Za-z0-9_.\-]+")


class Catalog:
    """Known accelerator models plus an alias table from raw product strings."""

    def __init__(
        self, models: Iterable[AcceleratorModel], aliases: Mapping[str, str] | None = None
    ) -> None:
        self._models: dict[str, AcceleratorModel] = {}
        for model in models:
            key = model.name.lower()
            if not model.name or key in self._models:
                raise InvalidInput(f"catalog: model name {model.name!r} is empty or repeated")
            if model.kind not in ("gpu", "npu"):
                raise InvalidInput(f"catalog: model {model.name}: kind must be 'gpu' or 'npu'")
            self._models[key] = model
        self._aliases: dict[str, str] = {}
        for raw, target in (aliases or {}).items():
            if not raw.strip() or not target.strip():
                raise InvalidInput(f"catalog alias {raw!r} -> {target!r}: both must be non-empty")
            known = self._models.get(target.strip().lower())
            self._aliases[raw.strip().lower()] = known.name if known else _clean(target)
        self._memo: dict[str, tuple[str, int | None]] = {}

    @property
    def models(self) -> tuple[AcceleratorModel, ...]:
        """Every model, in the order the catalog was built with."""
        return tuple(self._models.values())

    @property
    def aliases(self) -> dict[str, str]:
        """A copy of the alias table (lowercased raw string -> canonical name)."""
        return dict(self._aliases)

    def get(self, name: str) -> AcceleratorModel | None:
        """The model with this canonical name (case-insensitive), or None."""
        return self._models.get(name.lower())

    def rank(self, name: str) -> int | None:
        """The rank of a model given by canonical name or raw product string; None if unranked."""
        model = self._models.get(name.lower()) or self._models.get(self.canonical(name)[0].lower())
        return model.rank if model else None

    def canonical(self, raw: str) -> tuple[str, int | None]:
        """Raw product string -> (canonical model, device memory in MiB if the string says it).

        An explicit alias wins; then the normalizing rule finds a model word. A string naming
        no known model comes back cleaned (vendor prefix dropped, upper-cased, safe as a label
        value), never as an error: a member may carry hardware the catalog does not know.
        """
        hit = self._memo.get(raw)
        if hit is None:
            hit = self._resolve(raw)
            if len(self._memo) >= _MEMO_LIMIT:
                self._memo.clear()
            self._memo[raw] = hit
        return hit

    def extend(self, models: Iterable[AcceleratorModel],
               aliases: Mapping[str, str]) -> Callable[[], None]:
        """Add models (one of the same name is replaced) and aliases to this catalog in
        place - the hub does, once, from its configuration (``hub.catalogs``) - and return
        what undoes it. Checked like a new catalog: nothing changes if it is refused."""
        added = list(models)
        names = {m.name.lower() for m in added}
        kept = [m for m in self._models.values() if m.name.lower() not in names]
        merged = Catalog([*kept, *added], {**self._aliases, **aliases})
        saved = (self._models, self._aliases)

        def undo() -> None:
            self._models, self._aliases = saved
            self._memo.clear()

        self._models, self._aliases = merged._models, merged._aliases
        self._memo.clear()
        return undo

    def with_aliases(self, aliases: Mapping[str, str]) -> Catalog:
        """A new catalog with this one's aliases plus ``aliases`` (the new ones win)."""
        merged = dict(self._aliases)
        merged.update({raw.strip().lower(): target for raw, target in aliases.items()})
        return Catalog(self._models.values(), merged)

    def _resolve(self, raw: str) -> tuple[str, int | None]:
        text = raw.strip()
        words = [w for w in _SEPARATORS.split(text.lower()) if w]
        memory = _memory_in(words)
        alias = self._aliases.get(text.lower())
        if alias is not None:
            return alias, memory
        for word in words:
            found = self._model_word(word)
            if found is not None:
                name, trace_memory = found
                return name, memory if memory is not None else trace_memory
        return _clean(text), memory

    def _model_word(self, word: str) -> tuple[str, int | None] | None:
        """The model one word names, with memory when the word carries it (``v100m32``)."""
        if word.startswith("ascend") and len(word) > len("ascend"):
            word = word[len("ascend"):]
        model = self._models.get(_VARIANT_WORDS.get(word, word).lower())
        if model is not None:
            return model.name, None
        for pattern, name in _ASCEND_WORDS:
            if pattern.match(word) and name.lower() in self._models:
                return self._models[name.lower()].name, None
        trace = _TRACE_WORD.match(word)
        if trace and trace.group(1) in self._models:
            return self._models[trace.group(1)].name, int(trace.group(2)) * _GIB
        return None


def _memory_in(words: list[str]) -> int | None:
    for word in words:
        match = _MEMORY_WORD.match(word)
        if match and int(match.group(1)) > 0:
            return int(match.group(1)) * _GIB
    return None


def _clean(text: str) -> str:
    """An unknown product string as a label value: no vendor prefix, upper-cased, <= 63 chars."""
    words = [w for w in _SEPARATORS.split(text.strip()) if w]
    while len(words) > 1 and words[0].lower() in _VENDOR_WORDS:
        words = words[1:]
    if words and words[0].lower().startswith("ascend") and len(words[0]) > len("ascend"):
        words[0] = words[0][len("ascend"):]
    joined = _LABEL_VALUE_JUNK.sub("-", "-".join(words).upper())
    return joined[:63].strip("-_.")


DEFAULT_CATALOG = Catalog(DEFAULT_MODELS)
