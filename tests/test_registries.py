"""Every plug-in family is one :class:`~nebisect.registry.Registry` (DESIGN §3).

For each family, through the decorator or function its plug-ins use: a duplicate name is
an error that leaves the registry as it was, the listing holds the built-ins, and an
unknown name is a one-line user error naming the family. A record (a :class:`Case`) is
built without any of them loaded.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from nebisect.errors import NebisectError
from nebisect.fixes import FIXES, get_fix, register_fix, registered_fixes
from nebisect.fixes.logsumexp_max_shift import LogsumexpMaxShift
from nebisect.hazards.interval import TRANSFERS, transfer
from nebisect.hazards.registry import RULES, get_rule, lint_rule, registered_rules
from nebisect.inputs.families import FAMILIES, listing, value_family
from nebisect.inputs.families.base import ParametricFamily
from nebisect.mil.kernels import KERNELS, get_kernel, kernel, kernel_ops
from nebisect.mil.precision import (
    PRECISIONS,
    PrecisionModel,
    get_precision,
    precision_names,
    register_precision,
)
from nebisect.mil.profiles import PROFILES, Profile, get_profile, register_profile
from nebisect.mil.semantics import SEMANTICS, Semantics, get_semantics, register_semantics
from nebisect.mil.semantics.rules import RUNTIME_RULES, runtime_rule, runtime_rules
from nebisect.opspecs.ops import OP_SPECS, get_op, op_spec, registered_ops
from nebisect.opspecs.shapes import unary_with
from nebisect.patterns.grammar import IDIOMS, idiom
from nebisect.registry import Registry
from nebisect.targets.base import Target
from nebisect.targets.registry import TARGETS, register_target, registered_targets


def _unused(*args: Any, **kwargs: Any) -> None:
    """A plug-in body that is never run: only its registration is under test."""


@dataclass(frozen=True)
class Family:
    """One plug-in family as its users see it."""

    registry: Registry[Any, Any]
    #: registers a new entry under a free name *and* under ``taken``, in one call when
    #: the decorator takes several names, else under ``taken`` alone
    register_again: Callable[[], object]
    taken: object
    #: the public listing callers use
    listing: Callable[[], Iterable[Any]]
    builtins: set[Any]
    #: the public lookup, with an unknown name
    look_up_unknown: Callable[[], object]
    #: what the error says
    unknown: str


FAMILIES_UNDER_TEST = {
    "targets": Family(
        TARGETS,
        lambda: register_target("sim:not-yet-taken", "sim:ane")(type("Again", (Target,), {})),
        "sim:ane",
        lambda: registered_targets(),
        {"sim:ane", "sim:fp16", "sim:fp64", "coreml:ne", "torch:cpu:fp32"},
        # (get_target checks the grammar first: its names are registered ones or errors)
        lambda: TARGETS.get("sim:fp8"),
        r"unknown target 'sim:fp8' \(did you mean sim:fp",
    ),
    "kernels": Family(
        KERNELS,
        lambda: kernel("not_yet_taken", "softmax", variant="naive")(_unused),
        ("softmax", "naive"),
        lambda: kernel_ops(),
        {"softmax", "reduce_log_sum_exp", "conv", "gelu"},
        lambda: get_kernel("no_such_op", ("naive",)),
        "the simulator has no kernel for MIL op 'no_such_op'",
    ),
    "profiles": Family(
        PROFILES,
        lambda: register_profile(
            Profile("ane", "", "fp16", "ane", "ne", frozenset(), frozenset(), False)),
        "ane",
        lambda: PROFILES.names(),
        {"ane"},
        lambda: get_profile("tpu"),
        r"unknown device profile 'tpu'; known: ane",
    ),
    "precisions": Family(
        PRECISIONS,
        lambda: register_precision(PrecisionModel("fp32", np.float32, np.float32)),
        "fp32",
        lambda: precision_names(),
        {"fp64", "fp32", "fp16", "fp16-naive"},
        lambda: get_precision("fp8"),
        "unknown precision 'fp8'; known: fp16, fp16-naive, fp32, fp64",
    ),
    "op specs": Family(
        OP_SPECS,
        lambda: op_spec("softplus", family="activation", cases=unary_with())(_unused),
        "softplus",
        lambda: registered_ops(),
        {"reduce_log_sum_exp", "softplus", "softmax", "matmul", "topk"},
        lambda: get_op("reduce_logsumexp"),
        r"unknown op 'reduce_logsumexp' \(did you mean reduce_log_sum_exp",
    ),
    "value families": Family(
        FAMILIES,
        lambda: value_family("const", "again")(type("Again", (ParametricFamily,), {})),
        "const",
        lambda: [name for name, _ in listing()],
        {"const"},
        lambda: FAMILIES.get("cnst"),
        r"unknown value family 'cnst' \(did you mean const",
    ),
    "semantics": Family(
        SEMANTICS,
        lambda: register_semantics(Semantics("spec", (), "again")),
        "spec",
        lambda: SEMANTICS.names(),
        {"coreml", "spec"},
        lambda: get_semantics("x"),
        r"unknown semantics 'x'; known: coreml, spec",
    ),
    "runtime rules": Family(
        RUNTIME_RULES,
        lambda: runtime_rule("avg-pool-ceil-overhang", op_type="avg_pool", trigger="t",
                             stage="predict", units=frozenset({"cpu"}), message="m",
                             source="s", remedy="r")(_unused),
        "avg-pool-ceil-overhang",
        lambda: [rule.name for rule in runtime_rules()],
        {"avg-pool-ceil-overhang"},
        lambda: RUNTIME_RULES.get("avg-pool-ceil"),
        r"unknown runtime rule 'avg-pool-ceil' \(did you mean avg-pool-ceil-overhang",
    ),
    "fixes": Family(
        FIXES,
        lambda: register_fix(type("Again", (LogsumexpMaxShift,), {})),
        "logsumexp-max-shift",
        lambda: registered_fixes(),
        {"softplus-stable", "logsumexp-max-shift", "log-softmax-stable", "converter-compat"},
        lambda: get_fix("nope"),
        r"unknown fix 'nope'; known: converter-compat, log-softmax-stable",
    ),
    "lint rules": Family(
        RULES,
        lambda: lint_rule("softplus-fp16", severity="error", title="t", rationale="r",
                          source="s", fix="softplus-stable")(_unused),
        "softplus-fp16",
        lambda: registered_rules(),
        {"softplus-fp16", "lse-no-max-shift", "data-dependent-shape"},
        lambda: get_rule("softplus-f16"),
        r"unknown lint rule 'softplus-f16' \(did you mean softplus-fp16",
    ),
    "pattern idioms": Family(
        IDIOMS,
        lambda: idiom("slice_assign", "in-place")(_unused),
        "slice_assign",
        lambda: IDIOMS.names(),
        {"slice_assign", "sdpa_gqa", "lstm_twice", "mha_padding_mask"},
        lambda: IDIOMS.get("slice_asign"),
        r"unknown idiom 'slice_asign' \(did you mean slice_assign",
    ),
    "interval transfers": Family(
        TRANSFERS,
        lambda: transfer("not_yet_taken", "exp")(_unused),
        "exp",
        lambda: TRANSFERS.names(),
        {"exp", "add", "linear", "conv", "reduce_log_sum_exp"},
        lambda: TRANSFERS.get("nope"),
        r"unknown interval transfer 'nope'",
    ),
}


@pytest.mark.parametrize("name", FAMILIES_UNDER_TEST)
def test_a_duplicate_name_is_an_error_that_changes_nothing(name: str) -> None:
    family = FAMILIES_UNDER_TEST[name]
    before = family.registry.items()
    kept = family.registry.get(family.taken)
    with pytest.raises(ValueError, match=rf"{family.registry.kind} .* registered twice"):
        family.register_again()
    assert family.registry.items() == before
    assert family.registry.get(family.taken) is kept


@pytest.mark.parametrize("name", FAMILIES_UNDER_TEST)
def test_the_listing_holds_the_builtins(name: str) -> None:
    family = FAMILIES_UNDER_TEST[name]
    assert set(family.listing()) >= family.builtins


@pytest.mark.parametrize("name", FAMILIES_UNDER_TEST)
def test_an_unknown_name_is_a_user_error_naming_the_family(name: str) -> None:
    family = FAMILIES_UNDER_TEST[name]
    with pytest.raises(NebisectError, match=family.unknown) as raised:
        family.look_up_unknown()
    assert family.registry.kind in str(raised.value)
    assert "\n" not in str(raised.value)


def test_every_registry_of_the_package_is_under_test() -> None:
    """A new plug-in family must join the tests above."""
    import nebisect

    found = set()
    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith(nebisect.__name__):
            found |= {id(v) for v in vars(module).values() if isinstance(v, Registry)}
    assert found == {id(family.registry) for family in FAMILIES_UNDER_TEST.values()}


def test_a_failed_registration_under_several_names_registers_none() -> None:
    registry: Registry[str, int] = Registry("widget")
    registry.register("b", 1)
    with pytest.raises(ValueError, match="widget 'b' registered twice"):
        registry.register_all(["a", "b"], 2)
    with pytest.raises(ValueError, match="widget 'c' registered twice"):
        registry.register_all(["c", "c"], 3)
    assert registry.items() == [("b", 1)]


_CASE_WITHOUT_REGISTRIES = textwrap.dedent("""
    import sys
    from nebisect.case import Case, SourceRef

    case = Case(SourceRef("mlpackage", "m.mlpackage"), "sim:fp16-nan-suppressing", stage="predict")
    assert Case.from_dict(case.to_dict()) == case
    print(sorted(name for name in sys.modules if name.startswith("nebisect")))
""")


def test_a_case_is_built_without_any_registry_loaded() -> None:
    """Every registry module imports nebisect.registry: not loaded, no registry is."""
    done = subprocess.run([sys.executable, "-c", _CASE_WITHOUT_REGISTRIES],
                          capture_output=True, text=True, timeout=120, check=True)
    loaded = done.stdout.strip()
    assert "'nebisect.case'" in loaded and "nebisect.registry" not in loaded
