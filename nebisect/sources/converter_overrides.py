"""The converter overrides torch 2.13 + coremltools 9.0 need (the ``converter-compat``
fix, :mod:`nebisect.fixes.converter_compat`, and a run's cure of a conversion failure).

Why: all-MiniLM-L6-v2 with a masked mean-pool does not convert with this combination —
``Unsupported fx node new_ones`` on the torch.export path, ``only 0-dimensional arrays
can be converted to Python scalars`` on the jit.trace path (NumPy ≥ 2.4). The smallest
converters that fix both live here, and this fix makes them a named, verifiable
rewrite at the convert stage (:mod:`nebisect.sources.convert` runs ``setup`` in its
conversion child).

Before::

    torch graph ──► coremltools converters ──✗ (new_ones / aten::Int)

After::

    torch graph ──► coremltools converters + {new_ones, int} overrides ──► MIL program

The overrides are active only while the fix is (``with fix.active(): convert(...)``);
coremltools' own converters are restored afterwards.

With torch 2.13 and coremltools 9.0 the conversion of a transformers BERT encoder
fails on both of coremltools' torch paths, for two unrelated reasons:

* **torch.export** (followed by ``run_decompositions({})``, as coremltools asks for
  torch 2.13's TRAINING-dialect programs) — transformers builds its attention mask
  with ``mask.new_ones((), dtype=torch.bool) & (positions >= 0)``. coremltools has
  no converter for ``aten.new_ones`` and stops at graph import:
  ``Unsupported fx node new_ones, kind new_ones``. Past that, the ``&`` is
  ``aten.__and__.Tensor``, whose kind coremltools sanitizes to ``__and__`` (it
  strips the dunder before the ``aten.`` namespace, so the strip misses) and then
  finds unregistered: ``Unsupported fx node and_1, kind __and__``.
* **jit.trace** — the traced graph casts a constant one-element tensor to a Python
  int (``aten::Int``). coremltools folds it with ``int(x.val)``, which NumPy ≥ 2.4
  rejects for a 1-d array: ``only 0-dimensional arrays can be converted to Python
  scalars``.

The overrides below are the smallest converters that fix each: ``new_ones`` as a
constant (or a ``fill`` when the size is only known at run time) of the requested
dtype; ``__and__`` mapped to coremltools' own ``bitwise_and`` converter (the name
ends in ``_``, which ``register_torch_op`` refuses as "in-place", so it is set on
the registry directly — the lookup then sanitizes it to ``and`` anyway); and
``int`` folding a one-element constant through ``.item()`` before handing every
other case back to coremltools' own ``int`` converter. They are opt-in:
:func:`install` registers them with ``register_torch_op(override=True)`` and
:func:`uninstall` restores whatever was registered before, so a process can convert
with and without them (the fixes engine ships them as the ``converter-compat`` fix).

(Decomposing the exported program with torch's default core-ATen table instead of
``{}`` also avoids the export-path failures — ``new_ones`` becomes ``full`` and
``__and__`` becomes ``bitwise_and`` — but that rewrites the whole graph; nebisect
follows coremltools' documented recipe and keeps the repair here, op by op.)
Nothing here imports coremltools or torch until ``install()`` runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nebisect.mil.quiet import import_coremltools

#: Converter names this module registers (``int`` is coremltools' alias of ``_int``;
#: ``where.self`` of ``where``, whose tensor-scalar overload is registered beside it).
OVERRIDDEN_OPS = ("new_ones", "__and__", "_int", "int", "alias", "multiply", "where",
                  "where.self", "where.scalarother")
#: the conversion failures the overrides cure, as a note names them ("converted with
#: nebisect's converter overrides (new_ones, aten::Int, …)")
CURED_OPS = ("new_ones", "aten::Int", "aten.alias", "multiply", "where.ScalarOther")
#: What the converter says when it stops for a reason these overrides cure: no
#: ``new_ones`` converter (torch.export, jit.trace), no ``__and__`` converter
#: (torch.export), NumPy ≥ 2.4 refusing ``aten::Int``'s fold (jit.trace), no
#: ``aten.alias`` converter (torch.export: a ``*ForCausalLM``'s ``logits_to_keep``
#: slice), no ``multiply`` converter (``torch.multiply``, ConvBERT's attention; both
#: paths), no converter for ``torch.where`` with a scalar operand (torch.export:
#: transformers' eager attention mask, ``where.ScalarOther``).
CURED_MESSAGES = (
    "Unsupported fx node new_ones",
    "convert function for op 'new_ones'",
    "kind __and__",
    "only 0-dimensional arrays can be converted to Python scalars",
    "kind alias",
    "convert function for op 'alias'",
    "kind multiply",
    "convert function for op 'multiply'",
    "kind where.scalarother",
)

_saved: dict[str, Callable[..., Any] | None] = {}


#: how a conversion failure says the overrides were tried and did not cure it (DINOv2's
#: jit.trace: NumPy 2.4's ``aten::Int``, then ``upsample_bicubic2d``, which no override
#: converts)
FAILS_TOO = "with nebisect's converter overrides it fails too"


def overrides_hint(message: str, option: str = "--converter-overrides") -> str:
    """The advice for a conversion that failed with ``message``: rerun with ``option``
    when a pattern of :data:`CURED_MESSAGES` is in it and the overrides were not
    already tried in vain (:data:`FAILS_TOO`), else nothing."""
    if FAILS_TOO in message or not any(pattern in message for pattern in CURED_MESSAGES):
        return ""
    return (f"a known coremltools incompatibility that nebisect's converter overrides cure: "
            f"rerun with {option}")


def _registry() -> Any:
    import_coremltools()
    from coremltools.converters.mil.frontend.torch.torch_op_registry import _TORCH_OPS_REGISTRY

    return _TORCH_OPS_REGISTRY


def installed() -> bool:
    """True while this module's converters are the registered ones."""
    return bool(_saved)


def install() -> None:
    """Register the overrides (idempotent); remember what they replace."""
    if _saved:
        return
    registry = _registry()
    from coremltools.converters.mil.frontend.torch import register_torch_op

    for name in OVERRIDDEN_OPS:
        _saved[name] = registry.name_to_func_mapping.get(name)
    register_torch_op(new_ones, override=True)
    from coremltools.converters.mil.frontend.torch import ops

    registry.set_func_by_name(ops.bitwise_and, "__and__")
    register_torch_op(_int, torch_alias=["int"], override=True)
    # ``aten.alias`` is a view of its input: coremltools' own no-op (it has one for
    # ``alias_copy``, ``clone``, ``detach`` …, not for ``alias``).
    registry.set_func_by_name(ops.noop, "alias")
    # ``torch.multiply`` is ``torch.mul`` by another name, which coremltools lacks.
    registry.set_func_by_name(ops.mul, "multiply")
    register_torch_op(where, torch_alias=["where.self", "where.scalarother"], override=True)


def uninstall() -> None:
    """Restore coremltools' own converters (or their absence)."""
    if not _saved:
        return
    mapping = _registry().name_to_func_mapping
    for name, func in _saved.items():
        if func is None:
            mapping.pop(name, None)
        else:
            mapping[name] = func
    _saved.clear()


def new_ones(context: Any, node: Any) -> None:
    """``x.new_ones(size, dtype=None)``: ones of ``dtype`` (default: ``x``'s dtype).

    Core ML's ``fill`` holds fp16/fp32/int32/bool values, so other integer dtypes
    become int32 and float64 becomes float32, as coremltools does for ``full``.
    """
    import numpy as np
    from coremltools.converters.mil.frontend.torch import ops
    from coremltools.converters.mil.frontend.torch.utils import NUM_TO_NUMPY_DTYPE
    from coremltools.converters.mil.mil import Builder as mb
    from coremltools.converters.mil.mil import types

    inputs = ops._get_inputs(context, node, min_expected=2)
    x, size = inputs[0], inputs[1]
    dtype_var = inputs[2] if len(inputs) > 2 and inputs[2] is not None else None
    dtype_var = ops._get_kwinputs(context, node, "dtype", default=[dtype_var])[0]
    if dtype_var is None:
        dtype: Any = types.nptype_from_builtin(x.dtype)
    else:
        dtype = NUM_TO_NUMPY_DTYPE[int(dtype_var.val)]
    if np.issubdtype(dtype, np.integer):
        dtype = np.int32
    elif dtype == np.float64:
        dtype = np.float32
    if isinstance(size, list) and all(s.can_be_folded_to_const() for s in size):
        size = [int(s.val) for s in size]
    elif not isinstance(size, list) and size.can_be_folded_to_const():
        size = [int(s) for s in np.asarray(size.val).reshape(-1)]
    if isinstance(size, list) and all(isinstance(s, int) for s in size):
        context.add(mb.const(val=np.ones(size, dtype=dtype), name=node.name))
        return
    shape = mb.concat(values=size, axis=0) if isinstance(size, list) else size
    context.add(mb.fill(shape=shape, value=dtype(1), name=node.name))


def _int(context: Any, node: Any) -> None:
    """``aten::Int``: fold a one-element constant with ``.item()`` (NumPy ≥ 2.4 safe)."""
    import numpy as np
    from coremltools.converters.mil.frontend.torch import ops
    from coremltools.converters.mil.mil import Builder as mb

    x = ops._get_inputs(context, node, expected=1)[0]
    if x.can_be_folded_to_const() and np.size(x.val) == 1 and np.ndim(x.val) > 0:
        context.add(mb.const(val=np.int32(np.asarray(x.val).item()), name=node.name))
        return
    ops._int(context, node)


def where(context: Any, node: Any) -> None:
    """``torch.where(cond, a, b)``, also with a scalar ``b`` (``where.ScalarOther``,
    which coremltools has no converter for; it has one for ``where.ScalarSelf``), as
    coremltools' own ``where`` — except where its program would declare the wrong
    shape.

    MIL's ``select`` infers its output shape from ``a`` and ``b`` alone, and
    coremltools broadcasts the three operands only when every shape is static. So the
    mask transformers' eager attention builds, ``torch.where(mask, torch.zeros(()),
    min)`` with a mask of run-time length, converts to a ``select`` declared a scalar
    that computes the mask's shape — and every op after it is typed wrong. When ``a``
    and ``b`` hold one element each and ``cond`` does not, ``a`` is broadcast to
    ``cond``'s shape first (``tile``, exact), so the ``select`` is declared the shape
    it computes.
    """
    import numpy as np
    from coremltools.converters.mil.frontend import _utils
    from coremltools.converters.mil.frontend.torch import ops
    from coremltools.converters.mil.mil import Builder as mb
    from coremltools.converters.mil.mil import types
    from coremltools.converters.mil.mil.types.symbolic import any_symbolic

    inputs = ops._get_inputs(context, node)
    if len(inputs) != 3:
        ops.where(context, node)
        return
    cond, a, b = inputs

    def one_element(x: Any) -> bool:
        return all(size == 1 for size in getattr(x, "shape", ()))

    shapes = [tuple(getattr(x, "shape", ())) for x in (cond, a, b)]
    if not (any(any_symbolic(shape) for shape in shapes) and one_element(a)
            and one_element(b) and not one_element(cond)
            and cond.rank >= max(len(shapes[1]), len(shapes[2]))):
        ops.where(context, node)
        return
    a, b = ops.promote_input_dtypes([a, b])
    if not types.is_bool(cond.dtype):
        cond = mb.cast(x=cond, dtype="bool")
    if a.rank == 0:
        a = mb.reshape(x=a, shape=np.ones(cond.rank, dtype=np.int32))
    a = _utils.pymil_broadcast_to(a, mb.shape(x=cond), name=f"{node.name}_a_broadcast")
    context.add(mb.select(cond=cond, a=a, b=b, name=node.name))
