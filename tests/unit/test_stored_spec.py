"""A submitted spec is kept as the store gives it back, without validating its dump again.

``hub.activetask.stored_spec`` must be indistinguishable from
``TaskSpec.model_validate(spec.model_dump(mode="json"))`` (what the hub did at every submit,
and still does for a task read from the store): the same values of the same types, the same
dumps, the same fields counted as set, down to the nested models. The specs are validated
from the Python objects a JSON body parses to (the REST route, a profile's merged template)
and, as ``ProfileBook.resolve`` does for a spec without a profile, copied with
``profile_version`` cleared (the one path that does not validate).
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, reject
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from fuyao.spec import TaskSpec
from hub.activetask import ActiveTask, stored_spec
from hub.profiles import ProfileBook
from hub.store import TaskRecord

NAMES = st.sampled_from(["a", "train-1", "x9"])
TEXT = st.text(max_size=8)
CPU = st.one_of(st.integers(0, 64), st.floats(0, 64, allow_nan=False),
                st.sampled_from(["1", "500m", "2.5", "0.25", "1e3m"]))
MEMORY = st.one_of(st.integers(1, 1 << 20), st.floats(0.5, 1e6, allow_nan=False),
                   st.sampled_from(["1Gi", "512Mi", "1.5Gi", "16G", "100"]))
GPU = st.one_of(st.integers(0, 8), st.sampled_from([0.25, 0.5, 1.0, 2.0, "1", "500m", "0.5"]))
LABEL_VALUES = st.sampled_from(["", "a", "x-1", "v1.2"])
PREFERENCE = st.fixed_dictionaries(
    {"selector": st.sampled_from(["", "zone=a", "region in (eu, us)"])},
    optional={"weight": st.integers(1, 100)})
TOLERATION = st.fixed_dictionaries(
    {"key": st.sampled_from(["gpu", "example.com/spot"])},
    optional={"operator": st.sampled_from(["Equal", "Exists"]), "value": LABEL_VALUES,
              "effect": st.sampled_from([None, "NoSchedule", "PreferNoSchedule"])})

FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "image": st.sampled_from(["busybox:1.36", "nvcr.io/nvidia/pytorch:24.01-py3"]),
    "command": st.lists(TEXT, max_size=3),
    "cpu": CPU, "memory": MEMORY, "gpu": GPU,
    "gpu_model": st.sampled_from([None, "A100", "A100|H100", ">=A100", " H100 "]),
    "gpu_memory": st.sampled_from([None, "40Gi", 8192, 16.5]),
    "gpu_mem": st.sampled_from([None, "8Gi", 4096, 2.5]),
    "selector": st.sampled_from([None, "", "zone=a", "zone in (a, b), tier!=x", "gpu"]),
    "queue": NAMES,
    "priority": st.integers(-1_000_000, 1_000_000),
    "replicas": st.integers(1, 4),
    "duration": st.sampled_from([None, "30s", "5m", 30, 1.5, "1h30m"]),
    "labels": st.dictionaries(st.sampled_from(["team", "example.com/app", "k"]), LABEL_VALUES,
                              max_size=3),
    "failover": st.sampled_from(["restart-elsewhere", "never"]),
    "profile_version": st.sampled_from([None, 1, 7]),
    "gang": st.booleans(),
    "after": st.lists(NAMES, max_size=3, unique=True),
    "image_platforms": st.lists(st.sampled_from(["linux/amd64", "linux/arm64/v8"]),
                                max_size=2),
    "cluster_selector": st.sampled_from([None, "", "region=eu", "tier in (gold)"]),
    "cluster_preference": st.lists(PREFERENCE, max_size=2),
    "score_weights": st.dictionaries(st.sampled_from(["Pack", "Headroom", "Spread"]),
                                     st.one_of(st.integers(0, 1000),
                                               st.floats(0, 1000, allow_nan=False)),
                                     max_size=2),
    "tolerations": st.lists(TOLERATION, max_size=2),
    "preemptible": st.booleans(),
    "spread": st.sampled_from(["aggregated", "weighted"]),
    "spread_weights": st.dictionaries(NAMES, st.integers(0, 100), max_size=2),
    "spread_dynamic": st.booleans(),
    "min_replicas": st.sampled_from([None, 1, 2]),
}
BODIES = st.fixed_dictionaries({"name": NAMES}, optional=FIELDS)


def typed(value: Any) -> Any:
    """``value`` with every scalar's type beside it: 1 and 1.0 (and True) differ here."""
    if isinstance(value, BaseModel):
        return (type(value).__name__, typed(value.__dict__),
                sorted(value.model_fields_set))
    if isinstance(value, dict):
        return [(k, typed(v)) for k, v in value.items()]
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [typed(v) for v in value])
    return (type(value).__name__, value)


def submitted(body: dict[str, Any], copied: bool) -> TaskSpec:
    """The spec as ``Hub.submit`` hands it to the task book."""
    try:
        spec = TaskSpec.model_validate(body)
    except ValidationError:
        reject()
    if copied:   # ProfileBook.resolve of a spec without a profile: model_copy, no validation
        spec = ProfileBook(None, None).resolve(spec)  # type: ignore[arg-type]
    return spec


@given(BODIES, st.booleans())
def test_the_kept_spec_is_the_spec_its_dump_validates_to(body: dict[str, Any],
                                                         copied: bool) -> None:
    spec = submitted(body, copied)
    before = typed(spec)
    dumped = spec.model_dump(mode="json")
    kept, read = stored_spec(spec), TaskSpec.model_validate(dumped)
    assert kept == read
    assert typed(kept) == typed(read)
    assert kept.model_fields_set == read.model_fields_set == set(TaskSpec.model_fields)
    assert repr(kept.model_dump()) == repr(read.model_dump())
    assert kept.model_dump(mode="json") == read.model_dump(mode="json") == dumped
    assert kept.model_dump(exclude_unset=True) == read.model_dump(exclude_unset=True)
    assert kept.model_dump_json() == read.model_dump_json()
    assert kept.requests() == read.requests()
    assert kept.effective_selector() == read.effective_selector()
    assert kept is not spec and typed(spec) == before   # the caller's spec is untouched


def test_a_nested_model_with_unset_fields_is_validated_from_its_dump() -> None:
    spec = TaskSpec(name="t", cluster_preference=[{"selector": "zone=a"}],  # type: ignore[list-item]
                    tolerations=[{"key": "gpu"}])  # type: ignore[list-item]
    kept = stored_spec(spec)
    assert kept.cluster_preference[0].model_fields_set == {"selector", "weight"}
    assert kept.tolerations[0].model_fields_set == {"key", "operator", "value", "effect"}
    assert spec.cluster_preference[0].model_fields_set == {"selector"}


def test_a_task_made_from_its_record_and_its_spec_is_the_one_read_back() -> None:
    spec = TaskSpec(name="t", gpu=1, duration="60s", labels={"team": "a"})
    rec = TaskRecord(id="i", name="t", spec=spec.model_dump(mode="json"), state="Queued",
                     queue="default", priority=0, seq=3,
                     created_at=None, updated_at=None)  # type: ignore[arg-type]
    kept, read = ActiveTask.from_record(rec, spec), ActiveTask.from_record(rec)
    assert typed(kept.spec) == typed(read.spec)
    assert kept == read
