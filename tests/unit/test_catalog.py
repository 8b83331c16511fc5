"""The accelerator catalog: product strings -> canonical models, ranks, aliases."""

from __future__ import annotations

import pytest

from fuyao.catalog import DEFAULT_CATALOG, AcceleratorModel, Catalog
from fuyao.errors import InvalidInput

GIB = 1024


@pytest.mark.parametrize(
    ("raw", "model", "memory_mib"),
    [
        ("Tesla-V100-PCIE-16GB", "V100", 16 * GIB),
        ("Tesla-V100-SXM2-32GB", "V100", 32 * GIB),
        ("v100-pcie", "V100", None),
        ("NVIDIA-A100-SXM4-80GB", "A100", 80 * GIB),
        ("NVIDIA-A100-PCIE-40GB", "A100", 40 * GIB),
        ("NVIDIA-H100-80GB-HBM3", "H100", 80 * GIB),
        ("NVIDIA-H100-PCIe", "H100", None),
        ("Tesla-T4", "T4", None),
        ("Tesla-T4-SHARED", "T4", None),
        ("Tesla-P100-PCIE-16GB", "P100", 16 * GIB),
        ("NVIDIA-A10", "A10", None),
        ("NVIDIA-A10G", "A10", None),
        ("NVIDIA-A30", "A30", None),
        ("NVIDIA-L4", "L4", None),
        ("NVIDIA-L40S", "L40S", None),
        ("NVIDIA-H200", "H200", None),
        ("NVIDIA-B200", "B200", None),
        ("NVIDIA A100-SXM4-80GB", "A100", 80 * GIB),
        ("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", "A100", 40 * GIB),
        ("nvidia-tesla-v100", "V100", None),
        ("nvidia-h100-80gb", "H100", 80 * GIB),
        ("Ascend910B", "910B", None),
        ("ascend-910b", "910B", None),
        ("910B3", "910B", None),
        ("910ProA", "910A", None),
        ("310P3", "310P", None),
        ("V100M32", "V100", 32 * GIB),
        ("V100M16", "V100", 16 * GIB),
        ("G1", "G1", None),
        ("G2", "G2", None),
        ("G3", "G3", None),
        ("T4", "T4", None),
        ("P100", "P100", None),
        ("A10", "A10", None),
        ("a100", "A100", None),
        ("  H100  ", "H100", None),
    ],
    ids=lambda v: str(v),
)
def test_canonical_product_strings(raw: str, model: str, memory_mib: int | None) -> None:
    assert DEFAULT_CATALOG.canonical(raw) == (model, memory_mib)


@pytest.mark.parametrize(
    ("raw", "model"),
    [
        ("A100", "A100"),  # A10 must not swallow A100
        ("A10", "A10"),
        ("H200", "H200"),  # H100 must not match H200
        ("L40S", "L40S"),  # L4 must not swallow L40S
        ("NVIDIA-L40", "L40"),  # ...nor the unknown L40
        ("V100S-PCIE-32GB", "V100"),
        ("A1000", "A1000"),
    ],
    ids=lambda v: str(v),
)
def test_similar_names_do_not_swallow_each_other(raw: str, model: str) -> None:
    assert DEFAULT_CATALOG.canonical(raw)[0] == model


@pytest.mark.parametrize(
    ("raw", "cleaned"),
    [
        ("NVIDIA-GeForce-RTX-3090", "GEFORCE-RTX-3090"),
        ("huawei-Ascend910", "910"),
        ("AMD Instinct MI300X", "AMD-INSTINCT-MI300X"),
        ("weird/value:with stuff", "WEIRD-VALUE-WITH-STUFF"),
        ("x" * 100, "X" * 63),
        ("", ""),
    ],
    ids=["geforce", "ascend-family", "amd", "junk-chars", "too-long", "empty"],
)
def test_unknown_strings_come_back_cleaned_and_unranked(raw: str, cleaned: str) -> None:
    name, _ = DEFAULT_CATALOG.canonical(raw)
    assert name == cleaned
    assert DEFAULT_CATALOG.rank(raw) is None
    assert DEFAULT_CATALOG.get(name) is None


def test_ranks_follow_the_documented_order() -> None:
    gpus = ["T4", "P100", "V100", "A10", "A30", "L4", "A100", "L40S", "H100", "H200", "B200"]
    ranks = [DEFAULT_CATALOG.rank(name) or -1 for name in gpus]
    assert -1 not in ranks
    assert ranks == sorted(ranks) and len(set(ranks)) == len(ranks)
    npus = [DEFAULT_CATALOG.rank(name) or -1 for name in ("310P", "910A", "910B")]
    assert -1 not in npus and npus == sorted(npus) and len(set(npus)) == 3


@pytest.mark.parametrize("name", ["G1", "G2", "G3"])
def test_undisclosed_trace_models_have_no_rank(name: str) -> None:
    model = DEFAULT_CATALOG.get(name)
    assert model is not None
    assert (model.rank, model.vendor, model.kind) == (None, "unknown", "gpu")


@pytest.mark.parametrize(
    ("name", "vendor", "kind"),
    [("H100", "nvidia", "gpu"), ("910B", "huawei", "npu"), ("t4", "nvidia", "gpu")],
)
def test_get_is_by_canonical_name(name: str, vendor: str, kind: str) -> None:
    model = DEFAULT_CATALOG.get(name)
    assert model is not None and (model.vendor, model.kind) == (vendor, kind)


def test_get_does_not_resolve_product_strings_but_rank_does() -> None:
    assert DEFAULT_CATALOG.get("Tesla-V100-PCIE-16GB") is None
    assert DEFAULT_CATALOG.rank("Tesla-V100-PCIE-16GB") == DEFAULT_CATALOG.rank("V100")


def test_operator_alias_wins_over_the_rule_and_keeps_string_memory() -> None:
    catalog = DEFAULT_CATALOG.with_aliases({"Tesla-V100-SXM2-32GB": "a100", "Mystery-9000": "H100"})
    assert catalog.canonical("tesla-v100-sxm2-32gb") == ("A100", 32 * GIB)
    assert catalog.canonical("MYSTERY-9000") == ("H100", None)
    assert catalog.rank("Mystery-9000") == catalog.rank("H100")
    # The original catalog is unchanged.
    assert DEFAULT_CATALOG.canonical("Mystery-9000") == ("MYSTERY-9000", None)


def test_alias_is_exact_not_substring() -> None:
    catalog = DEFAULT_CATALOG.with_aliases({"v100-pcie": "T4"})
    assert catalog.canonical("v100-pcie")[0] == "T4"
    assert catalog.canonical("v100-pcie-16gb")[0] == "V100"


def test_later_aliases_override_earlier_ones() -> None:
    first = DEFAULT_CATALOG.with_aliases({"box": "T4"})
    assert first.with_aliases({"BOX": "A10"}).canonical("box")[0] == "A10"


def test_alias_to_a_model_the_catalog_does_not_know_is_cleaned() -> None:
    catalog = Catalog(DEFAULT_CATALOG.models, {"mi300": "amd mi300x"})
    assert catalog.canonical("MI300") == ("AMD-MI300X", None)
    assert catalog.rank("MI300") is None


@pytest.mark.parametrize(
    ("models", "aliases"),
    [
        ([AcceleratorModel("X1", "acme", "gpu", 1, 0)] * 2, None),
        ([AcceleratorModel("", "acme", "gpu", 1, 0)], None),
        ([AcceleratorModel("X1", "acme", "tpu", 1, 0)], None),
        ([AcceleratorModel("X1", "acme", "gpu", 1, 0)], {"": "X1"}),
        ([AcceleratorModel("X1", "acme", "gpu", 1, 0)], {"x": " "}),
    ],
    ids=["duplicate", "empty-name", "bad-kind", "empty-alias", "empty-target"],
)
def test_bad_catalog_config_is_invalid_input(
    models: list[AcceleratorModel], aliases: dict[str, str] | None
) -> None:
    with pytest.raises(InvalidInput):
        Catalog(models, aliases)


def test_custom_catalog_ranks_its_own_models() -> None:
    catalog = Catalog(
        [AcceleratorModel("X1", "acme", "gpu", 1, 8 * GIB),
         AcceleratorModel("X2", "acme", "gpu", 2, 16 * GIB)]
    )
    assert catalog.canonical("acme-x2-16gb") == ("X2", 16 * GIB)
    assert catalog.rank("X1") == 1
    assert catalog.canonical("H100") == ("H100", None)
    assert catalog.rank("H100") is None


def test_default_memory_is_known_for_ranked_models() -> None:
    for model in DEFAULT_CATALOG.models:
        assert (model.memory_mib > 0) == (model.rank is not None), model.name
