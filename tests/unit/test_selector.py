"""The selector language: parsing, canonical text, matching, and the errors users see."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fuyao.catalog import DEFAULT_CATALOG, AcceleratorModel, Catalog
from fuyao.errors import InvalidInput
from fuyao.selector import Requirement, Selector, parse_selector

H100_NODE = {
    "fuyao.io/gpu-model": "H100",
    "fuyao.io/gpu-memory": "80Gi",
    "fuyao.io/gpu-count": "8",
    "fuyao.io/gpu-vendor": "nvidia",
    "fuyao.io/gpu-node": "true",
    "fuyao.io/nvlink-enabled": "true",
    "fuyao.io/region": "cn-east",
    "fuyao.io/cpu-gen": "4",
    "kubernetes.io/arch": "amd64",
    "topology.kubernetes.io/zone": "cn-east-1a",
    "team": "ml",
}
T4_NODE = {
    "fuyao.io/gpu-model": "T4",
    "fuyao.io/gpu-memory": "16Gi",
    "fuyao.io/gpu-count": "4",
    "fuyao.io/gpu-node": "true",
    "fuyao.io/cpu-gen": "2500m",
    "kubernetes.io/arch": "arm64",
}
G1_NODE = {"fuyao.io/gpu-model": "G1", "fuyao.io/gpu-count": "2", "fuyao.io/gpu-node": "true"}
NPU_NODE = {"fuyao.io/npu-model": "910B", "fuyao.io/gpu-count": "8", "fuyao.io/gpu-node": "true"}
CPU_NODE = {"fuyao.io/gpu-count": "0", "fuyao.io/gpu-node": "false", "kubernetes.io/arch": "amd64"}
ODD_NODE = {  # admin overrides nobody validated
    "fuyao.io/gpu-model": "h100",
    "fuyao.io/gpu-memory": "81920",
    "fuyao.io/gpu-count": "lots",
    "fuyao.io/gpu-node": "TRUE",
    "fuyao.io/cpu-gen": "fast",
}
NODES = {"h100": H100_NODE, "t4": T4_NODE, "g1": G1_NODE, "npu": NPU_NODE, "cpu": CPU_NODE,
         "odd": ODD_NODE}

# selector text -> the nodes it matches
MATCHES = [
    ("", {"h100", "t4", "g1", "npu", "cpu", "odd"}),
    ("gpu-model = H100", {"h100", "odd"}),
    ("gpu-model == h100", {"h100", "odd"}),
    ("gpu-model = NVIDIA-H100-80GB-HBM3", {"h100", "odd"}),
    ("gpu-model = Tesla-T4", {"t4"}),
    ("gpu-model != H100", {"t4", "g1", "npu", "cpu"}),
    ("gpu-model in (t4, G1)", {"t4", "g1"}),
    ("gpu-model notin (T4,G1)", {"h100", "npu", "cpu", "odd"}),
    ("gpu-model >= A100", {"h100", "odd"}),
    ("gpu-model > H100", set()),
    ("gpu-model <= V100", {"t4"}),
    ("gpu-model < T4", set()),
    ("gpu-model = T4..A100", {"t4"}),
    ("gpu-model = T4..H100", {"h100", "t4", "odd"}),
    ("npu-model >= 910A", {"npu"}),
    ("npu-model = ascend-910b", {"npu"}),
    ("gpu-model = G1", {"g1"}),
    ("gpu-memory >= 40Gi", {"h100", "odd"}),
    ("gpu-memory = 81920", {"h100", "odd"}),
    ("gpu-memory = 80Gi", {"h100", "odd"}),
    ("gpu-memory < 32768Mi", {"t4"}),
    ("gpu-memory = 16Gi..80Gi", {"h100", "t4", "odd"}),
    ("gpu-count >= 4", {"h100", "t4", "npu"}),
    ("gpu-count = 8", {"h100", "npu"}),
    ("gpu-count != 8", {"t4", "g1", "cpu"}),
    ("gpu-count in (2, 4)", {"t4", "g1"}),
    ("gpu-count = 1..4", {"t4", "g1"}),
    ("gpu-node = true", {"h100", "t4", "g1", "npu", "odd"}),
    ("gpu-node = False", {"cpu"}),
    ("gpu-node", {"h100", "t4", "g1", "npu", "cpu", "odd"}),
    ("!gpu-model", {"npu", "cpu"}),
    ("nvlink-enabled", {"h100"}),
    ("! nvlink-enabled", {"t4", "g1", "npu", "cpu", "odd"}),
    ("cpu-gen >= 3", {"h100"}),
    ("cpu-gen > 2", {"h100", "t4"}),
    ("cpu-gen < 3", {"t4"}),
    ("cpu-gen = 2..3", {"t4"}),
    ("cpu-gen >= 500m", {"h100", "t4"}),
    ("arch = arm64", {"t4"}),
    ("arch in (amd64, arm64)", {"h100", "t4", "cpu"}),
    ("arch notin (arm64)", {"h100", "g1", "npu", "cpu", "odd"}),
    ("zone = cn-east-1a", {"h100"}),
    ("region = cn-east, gpu-model >= A100", {"h100"}),
    ("gpu-model>=A100,gpu-memory>=40Gi,arch=amd64", {"h100"}),
    ("gpu-node = true, gpu-count >= 4, !nvlink-enabled", {"t4", "npu"}),
    ("team/x = 1", set()),
    ("gpu-model in (A100), gpu-model in (H100)", set()),
]


@pytest.mark.parametrize(("text", "wanted"), MATCHES, ids=[m[0] or "empty" for m in MATCHES])
def test_matches(text: str, wanted: set[str]) -> None:
    selector = parse_selector(text)
    assert {name for name, labels in NODES.items() if selector.matches(labels)} == wanted


_LABEL_KEYS = sorted({key for labels in NODES.values() for key in labels} | {
    "fuyao.io/site", "kubernetes.io/hostname"})


@settings(max_examples=300, deadline=None)
@given(text=st.sampled_from([text for text, _ in MATCHES]),
       base=st.sampled_from(sorted(NODES)),
       changes=st.dictionaries(st.sampled_from(_LABEL_KEYS),
                               st.none() | st.sampled_from(
                                   ["H100", "T4", "80Gi", "4", "true", "amd64", "x", ""])))
def test_a_verdict_reads_only_the_selectors_keys(
        text: str, base: str, changes: dict[str, str | None]) -> None:
    """What the fleet-wide match memo rests on (``ClusterInfo._matching_groups``): labels
    with the same values at ``Selector.keys`` get the same verdict, whatever else differs."""
    selector = parse_selector(text)
    labels = {**NODES[base]}
    for key, value in changes.items():
        if value is None:
            labels.pop(key, None)
        else:
            labels[key] = value
    only_read = {key: labels[key] for key in selector.keys if key in labels}
    assert selector.matches(labels) == selector.matches(only_read)
    assert set(selector.keys) == {r.key for r in selector.requirements}


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("gpu-model >= a100", "fuyao.io/gpu-model>=A100"),
        ("gpu-model=Tesla-V100-PCIE-16GB", "fuyao.io/gpu-model=V100"),
        ("fuyao.io/gpu-model >=A100", "fuyao.io/gpu-model>=A100"),
        ("gpu-model in (h100, A100, a100)", "fuyao.io/gpu-model in (A100, H100)"),
        ("arch notin (arm64)", "kubernetes.io/arch!=arm64"),
        ("arch in (arm64, arm64)", "kubernetes.io/arch=arm64"),
        ("gpu-memory >= 40960", "fuyao.io/gpu-memory>=40Gi"),
        ("gpu-memory = 1536", "fuyao.io/gpu-memory=1536Mi"),
        ("gpu-count == 2.0", "fuyao.io/gpu-count=2"),
        ("gpu-node = TRUE", "fuyao.io/gpu-node=true"),
        ("gpu-model = a100..H100", "fuyao.io/gpu-model=A100..H100"),
        ("x = 1..5", "fuyao.io/x=1..5"),
        ("  gpu-node  ", "fuyao.io/gpu-node"),
        ("!gpu-node", "!fuyao.io/gpu-node"),
        ("team != ml", "fuyao.io/team!=ml"),
        ("example.com/team in (b, a)", "example.com/team in (a, b)"),
        ("hostname = n1, os = linux", "kubernetes.io/hostname=n1, kubernetes.io/os=linux"),
        ("x in (a..b)", "fuyao.io/x in (a..b)"),
        ("", ""),
        (" \t\n", ""),
    ],
    ids=lambda v: repr(v),
)
def test_canonical_text(text: str, canonical: str) -> None:
    selector = parse_selector(text)
    assert str(selector) == canonical
    assert parse_selector(str(selector)) == selector  # canonical text reads back the same


def test_empty_selector() -> None:
    assert parse_selector("").empty and parse_selector("   ").empty
    assert Selector().empty and Selector().matches({})
    assert not parse_selector("gpu-node").empty


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("gpu-model >= ", "missing value after '>=' (column 14)"),
        ("gpu-model >=", "missing value after '>='"),
        ("gpu-model >= G1", "G1 has no rank"),
        ("gpu-model > NVIDIA-GeForce-RTX-4090",
         "'NVIDIA-GeForce-RTX-4090' is not a model the catalog ranks"),
        ("gpu-model >= 910B", "910B is an NPU: order it with npu-model"),
        ("npu-model >= H100", "H100 is a GPU: order it with gpu-model"),
        ("gpu-model >= 80Gi", "is not a model the catalog ranks"),
        ("gpu-model = H100..A100", "empty range H100..A100"),
        ("gpu-model = A100..G1", "G1 has no rank"),
        ("team >= ml", "'ml' is not a number or quantity"),
        ("x < -1", "'-1' is not a number or quantity"),
        ("x = a..b", "'a' is not a number or quantity"),
        ("x = ..5", "range '..5' needs both ends"),
        ("x = 5..", "range '5..' needs both ends"),
        ("gpu-count >= 1.5", "'1.5' is not a whole, non-negative device count"),
        ("gpu-count = -1", "is not a whole, non-negative device count"),
        ("gpu-count >= 1e999999", "device count"),
        ("gpu-memory >= lots", "'lots' is not a whole, non-negative memory size"),
        ("gpu-node = yes", "fuyao.io/gpu-node is 'true' or 'false', not 'yes'"),
        ("gpu-node >= true", "cannot be ordered"),
        ("fuyao.io/region > 5",
         "fuyao.io/region holds names, which cannot be ordered (use = or in)"),
        ("arch >= 64", "kubernetes.io/arch holds names, which cannot be ordered"),
        ("site = 1..3", "fuyao.io/site holds names, which cannot be ordered"),
        ("gpu-modle = A100",
         "unknown key 'fuyao.io/gpu-modle' (did you mean 'fuyao.io/gpu-model'?)"),
        ("gpu-mem >= 40Gi", "did you mean 'fuyao.io/gpu-memory'?"),
        ("a,,b", "empty requirement after ',' (column 3)"),
        ("a,", "empty requirement after ','"),
        (",a", "expected a label key, found ','"),
        ("= x", "expected a label key, found '=' (column 1)"),
        ("!", "missing key after '!'"),
        ("!= x", "expected a label key"),
        ("x y", "expected an operator after key 'x', found 'y' (column 3)"),
        ("gpu-model in A100..H100", "expected '(' after 'in' (a range is written key = low..high)"),
        ("gpu-model in (A100", "expected ',' or ')' in 'in (...)', found the end"),
        ("gpu-model in ()", "missing value in 'in (...)'"),
        ("gpu-model in (A100,)", "missing value after ','"),
        ("gpu-model notin A100", "expected '(' after 'notin'"),
        ("!gpu-node = true", "unexpected '=' after '!fuyao.io/gpu-node'"),
        ("gpu-model = A100 .. H100", "a range has no spaces"),
        ("gpu-model = A100 H100", "requirements are separated by ','"),
        ("x = (a)", "missing value after '='"),
        ("Bad_ = 1", "'fuyao.io/Bad_' is not a valid label key"),
        ("-x = 1", "is not a valid label key"),
        ("a/b/c = 1", "is not a valid label key"),
        ("x = 1)", "unexpected ')'"),
    ],
    ids=lambda v: repr(v),
)
def test_parse_errors_quote_the_selector_and_point_at_the_problem(
    text: str, message: str
) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_selector(text)
    assert caught.value.message.startswith(f'selector "{text}": ')
    assert message in caught.value.message


WEIRD_VALUES = ["", " ", "lots", "-5", "1e999999", "1e9999999", "NaN", "inf", "80 Gi", "G1",
                "910B", "x" * 300, "1..2", "true", "∞"]
ALL_KINDS = (
    "gpu-model >= A100, npu-model < 910B, gpu-model = H100, gpu-model in (T4), "
    "gpu-memory >= 40Gi, gpu-memory = 80Gi, gpu-count > 2, gpu-count = 4, gpu-node = true, "
    "cpu-gen >= 3, cpu-gen = 1..9, team = ml, team notin (a), nvlink-enabled != true"
)


@pytest.mark.parametrize("value", WEIRD_VALUES, ids=lambda v: repr(v[:12]))
def test_matching_never_raises_on_node_data(value: str) -> None:
    selector = parse_selector(ALL_KINDS)
    for requirement in selector.requirements:
        labels = {requirement.key: value}
        assert requirement.matches(labels) in (True, False)
    assert selector.matches({r.key: value for r in selector.requirements}) is False


def test_uncomparable_node_values_do_not_match_even_negations() -> None:
    assert not parse_selector("gpu-count != 4").matches({"fuyao.io/gpu-count": "lots"})
    assert not parse_selector("gpu-count notin (4)").matches({"fuyao.io/gpu-count": "lots"})
    assert parse_selector("gpu-count != 4").matches({})  # absent key: != holds


def test_ordered_model_comparison_needs_a_ranked_node_model_of_the_same_kind() -> None:
    selector = parse_selector("gpu-model >= T4")
    assert selector.matches({"fuyao.io/gpu-model": "A10"})
    assert not selector.matches({"fuyao.io/gpu-model": "G3"})  # undisclosed: no order
    assert not selector.matches({"fuyao.io/gpu-model": "910B"})  # an NPU on the GPU key
    assert not selector.matches({"fuyao.io/gpu-model": "MI300X"})  # unknown hardware
    assert selector.matches({"fuyao.io/gpu-model": "Tesla-V100-PCIE-16GB"})


def test_parse_is_cached() -> None:
    assert parse_selector("gpu-model >= A100") is parse_selector("gpu-model >= A100")


def test_custom_catalog_orders_its_own_models() -> None:
    catalog = Catalog(
        [*DEFAULT_CATALOG.models, AcceleratorModel("MI300X", "amd", "gpu", 95, 192 * 1024)]
    )
    selector = parse_selector("gpu-model >= H100", catalog)
    assert selector.matches({"fuyao.io/gpu-model": "MI300X"})
    assert not parse_selector("gpu-model >= H100").matches({"fuyao.io/gpu-model": "MI300X"})
    with pytest.raises(InvalidInput, match="MI300X"):
        parse_selector("gpu-model >= MI300X")
    assert parse_selector("gpu-model >= MI300X", catalog).matches({"fuyao.io/gpu-model": "B200"})


def test_requirement_matches_against_another_catalog() -> None:
    catalog = DEFAULT_CATALOG.with_aliases({"box-9": "H200"})
    requirement = Requirement("gpu-model", ">=", ("H100",))
    assert not requirement.matches({"fuyao.io/gpu-model": "box-9"})
    assert requirement.matches({"fuyao.io/gpu-model": "box-9"}, catalog)


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (("gpu-model", ">=", ("a100",)), "fuyao.io/gpu-model>=A100"),
        (("gpu-model", "in", ["H100", "a100"]), "fuyao.io/gpu-model in (A100, H100)"),
        (("gpu-model", "=", "A100"), "fuyao.io/gpu-model=A100"),
        (("arch", "exists", ()), "kubernetes.io/arch"),
        (("x", "!exists", ()), "!fuyao.io/x"),
        (("x", "range", ("1", "2")), "fuyao.io/x=1..2"),
        (("x", "=", ("a..b",)), "fuyao.io/x in (a..b)"),
    ],
    ids=lambda v: repr(v),
)
def test_requirement_built_directly_is_normalized(args: tuple[str, str, object], text: str) -> None:
    requirement = Requirement(*args)  # type: ignore[arg-type]
    assert str(requirement) == text
    assert parse_selector(text).requirements == (requirement,)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("x", "~", ("1",)), "unknown operator '~'"),
        (("x", "=", ()), "takes 1 value(s), got 0"),
        (("x", "exists", ("1",)), "takes 0 value(s), got 1"),
        (("x", "in", ()), "takes at least 1 value(s), got 0"),
        (("x", "range", ("1",)), "takes 2 value(s), got 1"),
        (("gpu-model", ">=", ("G1",)), "G1 has no rank"),
    ],
    ids=lambda v: repr(v),
)
def test_bad_requirement_is_invalid_input(
    args: tuple[str, str, tuple[str, ...]], message: str
) -> None:
    with pytest.raises(InvalidInput, match="selector requirement") as caught:
        Requirement(*args)
    assert message in caught.value.message


def test_unmet_names_the_first_failing_requirement() -> None:
    selector = parse_selector("gpu-node = true, gpu-model >= A100, gpu-count >= 8")
    assert str(selector.unmet(T4_NODE)) == "fuyao.io/gpu-model>=A100"
    assert selector.unmet(H100_NODE) is None


def test_selectors_compare_and_hash_by_canonical_form() -> None:
    a = parse_selector("gpu-model in (a100, H100)")
    b = parse_selector("fuyao.io/gpu-model in (H100,A100)")
    assert a == b and hash(a) == hash(b)


def test_selector_survives_pickling() -> None:
    selector = parse_selector("gpu-model >= A100, arch = amd64")
    copy = pickle.loads(pickle.dumps(selector))
    assert copy == selector and copy.matches(H100_NODE) and not copy.matches(T4_NODE)


def test_task_spec_gpu_model_forms_parse() -> None:
    # The shapes fuyao.spec.TaskSpec.effective_selector produces.
    for text in ("fuyao.io/gpu-model >=A100", "fuyao.io/gpu-model in (A100, H100)",
                 "fuyao.io/gpu-model = V100M32", "arch = arm64, fuyao.io/gpu-model !=T4"):
        assert not parse_selector(text).empty
