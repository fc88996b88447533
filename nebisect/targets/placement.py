"""Placement that fails closed: a pass on CPU fallback is not a pass on the Neural Engine.

A target that reports where ops ran (Core ML's compute plan, the simulator's ANE
profile) is checked against the device its name asks for. The rules, in order:

1. placement that cannot be asserted (no compute plan on this OS, a plan that describes
   another input shape, a plan with no placed op) is *unknown*: the verdict says why,
   and a pass becomes ``skipped`` — it cannot be told from a fallback;
2. with an op of interest: it must be in the program, placed, and every instance on the
   requested device — otherwise ``unrouted``, whatever the numbers said;
3. without one: at least one compute op must run on the requested device — when every
   compute op ran elsewhere the case is ``unrouted``; unless the case notes placement
   (``CaseOptions.note_placement``: ``run`` without ``--require``), where placement is
   information: the verdict keeps its status and says why (``placement_note``).

A ``mismatch`` whose op ran elsewhere is ``unrouted`` too (the mismatch is kept in the
verdict's target facts, ``judged``): it is not a failure *of the requested device*, and
a minimizer that kept it would slip from a Neural Engine bug to a CPU one. Crashes,
errors and timeouts are kept as they are. Every checked row reports ``routed``: how many
compute ops ran on the requested device out of how many were placed, and
``off_device``: the compute ops placed elsewhere, counted per op type and, where the
backend says, the reason (:func:`off_device`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

#: Devices each target must place ops on.
REQUIRED_DEVICES: dict[str, tuple[str, ...]] = {
    "coreml:ne": ("ne",),
    "coreml:gpu": ("gpu",),
    "coreml:all": ("ne", "gpu"),
    "sim:ane": ("ne",),
}


def required_devices(target: str) -> tuple[str, ...]:
    """Devices ``target`` must place ops on; a remote device (``coreml-remote:<device>:ne``)
    asks what the same compute units ask on the Mac."""
    backend, _, rest = target.partition(":")
    if backend == "coreml-remote":
        return REQUIRED_DEVICES.get(f"coreml:{rest.rpartition(':')[2]}", ())
    return REQUIRED_DEVICES.get(target, ())

#: Ops that compute nothing: Core ML places them next to their neighbours, so where
#: they ran says nothing about routing.
NOT_COMPUTE = frozenset({
    "const", "cast", "reshape", "transpose", "squeeze", "expand_dims", "identity", "shape",
    "slice_by_index", "slice_by_size", "concat", "split", "stack", "tile",
})


@dataclass(frozen=True)
class Routing:
    """The placement check of one prediction on a target that requires a device."""

    required: tuple[str, ...]
    on_device: int
    compute_ops: int
    unrouted: str = ""  # why the case is unrouted ('' when routed)
    unknown: str = ""  # why placement cannot be asserted ('' when it can)

    @property
    def summary(self) -> str:
        if self.unknown:
            return f"placement unknown: {self.unknown}"
        return (f"{self.on_device}/{self.compute_ops} compute ops on "
                f"{'/'.join(self.required)}")


def check_routing(
    required: tuple[str, ...],
    placement: dict[str, str],
    op_types: dict[str, str],
    op_of_interest: str = "",
    unknown: str = "",
) -> Routing:
    """Apply the module's rules to one prediction's placement."""
    compute = {n: d for n, d in placement.items() if op_types.get(n) not in NOT_COMPUTE}
    on_device = sum(d in required for d in compute.values())
    if not unknown and not placement:
        unknown = "the compute plan placed no op"
    if unknown:
        return Routing(required, on_device, len(compute), unknown=unknown)
    wanted = "/".join(required)
    if op_of_interest:
        names = [n for n, kind in op_types.items() if kind == op_of_interest]
        if not names:
            why = f"the op of interest {op_of_interest} is not in the program that ran"
        elif not any(n in placement for n in names):
            why = f"the op of interest {op_of_interest} has no device in the compute plan"
        else:
            elsewhere = [n for n in names if placement.get(n, "none") not in required]
            why = (f"{elsewhere[0]} ({op_of_interest}) ran on "
                   f"{placement.get(elsewhere[0], 'no device')}, not on {wanted}"
                   if elsewhere else "")
        return Routing(required, on_device, len(compute), unrouted=why)
    why = "" if on_device or not compute else (
        f"every compute op ({len(compute)}) ran elsewhere than {wanted}")
    return Routing(required, on_device, len(compute), unrouted=why)


def off_device(required: tuple[str, ...], placement: dict[str, str], op_types: dict[str, str],
               fallbacks: dict[str, str]) -> dict[str, int]:
    """The compute ops placed off ``required``, counted per op type and reason, most
    first: ``{"add (integer dtype)": 2, "softmax (fp32 dtype)": 1}`` — the op type alone
    where the backend gives no reason (``fallbacks``: op name → reason)."""
    counts: Counter[str] = Counter()
    for name, device in placement.items():
        kind = op_types.get(name) or "?"
        if kind in NOT_COMPUTE or device in required:
            continue
        reason = fallbacks.get(name, "")
        counts[f"{kind} ({reason})" if reason else kind] += 1
    return dict(counts.most_common())
