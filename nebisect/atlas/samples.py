"""One-op modules from torch's own op database (OpInfo), written as torch sources.

torch's ``op_db`` lists about 700 ops, each with ``sample_inputs`` that cover its keyword
arguments (``var(correction=2)``, ``gelu(approximate='tanh')``, ``div(rounding_mode=…)``,
pooling with ``ceil_mode``, padding modes, …). Each sample becomes an :class:`OpSample`:
its tensors are the module's named inputs (``x0``, ``x1``, …); every other argument is
baked in as a Python literal. :meth:`OpSample.source_text` writes it as an ordinary
``file.py:model`` source — what ``run`` judges, what a corpus case stores and what a
maintainer reads as the repro.

Only what a Core ML program can take becomes a sample (:func:`sample_of` says why not
otherwise): real tensors of the dtypes asked for, of rank ≥ 1 and with elements; other
arguments that are literals (numbers, strings, booleans, None, dtypes, and tuples or
lists of them). Samples that call an op the same way (the same argument kinds and
literals, whatever the shapes) are one :attr:`OpSample.form`: a sweep keeps the first
of each form, which is where converter bugs live (a keyword read as a bool, a mode
dropped), not in shapes.

``op_db`` is torch's internal API: :func:`op_database` checks the torch version it was
written against and fails with one line when the database's shape is not what it
reads.
"""

from __future__ import annotations

import hashlib
import math
import warnings
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from nebisect.errors import NebisectError

#: the torch release whose op database this module reads (internal API: see module doc)
TORCH_VERSION = "2.13"
#: tensor dtypes a sweep can ask for, by the name ``--dtypes`` takes
SAMPLE_DTYPES = ("float32", "int32", "int64", "bool")
#: the largest tensor a sample may carry, in elements (OpInfo's are small; this keeps the
#: written sources readable)
MAX_ELEMENTS = 4096


class Sample(Protocol):
    """What a sweep judges: an :class:`OpSample`, or a generated pattern program
    (:class:`~nebisect.patterns.program.PatternProgram`). ``op_name`` is its row in the
    atlas, ``index`` which of that row's samples it is, ``call`` what it computes;
    ``source_text()`` is the torch source ``run`` judges and ``smaller()`` the samples
    one step simpler a shrink tries."""

    @property
    def op_name(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def index(self) -> str: ...

    @property
    def call(self) -> str: ...

    @property
    def shapes(self) -> str: ...

    def digest(self) -> str: ...

    @property
    def found_by(self) -> str:
        """The command that finds it again (a corpus case's provenance)."""
        ...

    def source_text(self) -> str: ...

    def smaller(self) -> Iterator[Sample]: ...


@dataclass(frozen=True)
class OpSample:
    """One call of one op: ``call`` is the expression the module's ``forward`` returns,
    over its inputs ``x0``, ``x1``, … (``inputs``: name → array, in order). ``index`` is
    ``dtype:n`` (OpInfo's n-th sample at that dtype), ``dtype:n:one`` for the sample with
    its scalar constants set to 1 (:func:`samples_of`)."""

    op: str
    variant: str
    index: str
    call: str
    inputs: dict[str, np.ndarray] = field(compare=False, hash=False)
    #: how the input's values were moved from OpInfo's (``neg-inf``), "" when they were not
    values: str = ""

    @property
    def op_name(self) -> str:
        """The op as the atlas names it: OpInfo's name, ``.variant`` when it has one."""
        return f"{self.op}.{self.variant}" if self.variant else self.op

    @property
    def name(self) -> str:
        """A file-name-safe identity: op, variant and sample index."""
        return f"{self.op_name}-{self.index}".replace(".", "_").replace(":", "-")

    @property
    def form(self) -> str:
        """The call, its inputs' dtypes and how their values were moved, their shapes
        left out: samples of one form call the op the same way on the same dtypes (an
        int32 sample is not a float32 one: converters lower the two differently) and
        values (an input holding -inf is not one of finite values)."""
        dtypes = " ".join(str(a.dtype) for a in self.inputs.values())
        return f"{self.call} @ {dtypes}" + (f" with {self.values}" if self.values else "")

    @property
    def shapes(self) -> str:
        """The inputs' shapes, ``5×5×5 10×5``."""
        return " ".join("×".join(map(str, a.shape)) for a in self.inputs.values())

    @property
    def found_by(self) -> str:
        return f"nebisect atlas --ops {self.op_name}"

    def digest(self) -> str:
        """What identifies the sample's content (its source text's hash)."""
        return hashlib.sha256(self.source_text().encode()).hexdigest()

    def source_text(self) -> str:
        """The sample as a torch source (``file.py:model``): a one-op module whose example
        inputs are the sample's own values, written exactly."""
        names = list(self.inputs)
        lines = [
            f'"""{self.op_name} sample {self.index} from torch\'s op database (OpInfo):',
            f"``{self.call}``",
            '"""',
            "",
            "import torch",
            "",
            "",
            "class OneOp(torch.nn.Module):",
            f"    def forward(self, {', '.join(names)}):",
            f"        return {self.call}",
            "",
            "",
            "def model():",
            '    return {"module": OneOp(), "example_inputs": {',
            *(f"        {name!r}: {_tensor_literal(array)},"
              for name, array in self.inputs.items()),
            "    }}",
            "",
        ]
        return "\n".join(lines)

    def smaller(self) -> Iterator[OpSample]:
        """The sample with one input's axis cut, each way in turn: to length 1, then to half
        its length (its first elements), largest inputs first — what a shrink tries. The
        rank and the call stay: a cut that makes the call invalid fails in torch, and the
        run judging it says so."""
        names = sorted(self.inputs, key=lambda n: -self.inputs[n].size)
        for name in names:
            array = self.inputs[name]
            for axis, size in enumerate(array.shape):
                for length in dict.fromkeys((1, (size + 1) // 2)):
                    if length >= size:
                        continue
                    cut = np.take(array, np.arange(length), axis=axis)
                    yield OpSample(self.op, self.variant, _shrunk(self.index), self.call,
                                   {**self.inputs, name: cut}, self.values)


def op_database() -> list[Any]:
    """torch's OpInfo list (``op_db``), checked: the torch version this module reads, the
    attributes it uses. Needs ``expecttest`` (the ``atlas`` extra)."""
    import torch

    if not torch.__version__.startswith(TORCH_VERSION):
        raise NebisectError(f"the atlas reads torch {TORCH_VERSION}'s op database; this is "
                            f"torch {torch.__version__} (its internal OpInfo API may differ)")
    try:
        from torch.testing._internal.common_methods_invocations import op_db
    except ImportError as error:
        raise NebisectError(f"torch's op database does not import ({error}); the atlas "
                            "needs the 'atlas' extra: pip install 'nebisect[atlas]'") from None
    if not op_db or not all(hasattr(o, attr) for o in op_db
                            for attr in ("name", "variant_test_name", "sample_inputs")):
        raise NebisectError("torch's op database has changed shape (OpInfo without name, "
                            "variant_test_name or sample_inputs)")
    return list(op_db)


def op_name(info: Any) -> str:
    return f"{info.name}.{info.variant_test_name}" if info.variant_test_name else info.name


def callable_name(info: Any) -> str | None:
    """``torch.<name>`` when OpInfo's name is a public torch function (``var`` →
    ``torch.var``, ``nn.functional.gelu`` → ``torch.nn.functional.gelu``), else None:
    the written source must call the op by a name anyone can read."""
    import torch

    target: Any = torch
    for part in info.name.split("."):
        if part.startswith("_") or not hasattr(target, part):
            return None
        target = getattr(target, part)
    return f"torch.{info.name}" if callable(target) else None


def samples_of(info: Any, dtypes: Sequence[str]) -> Iterator[OpSample | str]:
    """Each sample of one OpInfo at each dtype asked for the op supports: an
    :class:`OpSample`, or the reason it is not one."""
    import torch

    function = callable_name(info)
    if function is None:
        yield f"{op_name(info)}: no public torch function of that name"
        return
    supported = info.supported_dtypes("cpu")
    for dtype_name in dtypes:
        dtype = getattr(torch, dtype_name)
        if dtype not in supported:
            continue
        try:
            with warnings.catch_warnings():  # torch's deprecation and beta notices
                warnings.simplefilter("ignore")
                samples = list(info.sample_inputs("cpu", dtype))
        except Exception as error:  # torch's generator: any failure is a skip reason
            yield f"{op_name(info)}: sample_inputs failed ({type(error).__name__})"
            continue
        for index, sample in enumerate(samples):
            at = f"{dtype_name}:{index}"
            made = sample_of(info, function, at, sample.input, sample.args, sample.kwargs)
            yield made
            if not isinstance(made, OpSample):
                continue
            if _SCALAR in made.call:
                yield sample_of(info, function, f"{at}:one", sample.input, sample.args,
                                sample.kwargs, one=True)
            for axis, tensor, args, kwargs in mutations(info, sample.input, sample.args,
                                                        sample.kwargs):
                yield sample_of(info, function, f"{at}:{axis}", tensor, args, kwargs,
                                values=axis if tensor is not sample.input else "")


#: argument names that hold a dimension (or a list of them)
DIM_ARGUMENTS = frozenset({"dim", "dims", "axis", "dim0", "dim1", "start_dim", "end_dim"})


def mutations(info: Any, tensor: Any, args: Sequence[Any], kwargs: dict[str, Any]
              ) -> Iterator[tuple[str, Any, list[Any], dict[str, Any]]]:
    """An OpInfo sample moved along the axes converters get wrong and OpInfo's samples
    rarely take: its dimensions counted from the end (``neg-dims``: ``cumsum(x, -1)``
    where OpInfo only has ``cumsum(x, 1)``); a window's start counted from the end,
    reaching it (``neg-start``: ``narrow(x, 2, -2, 2)``, the last two: coremltools PR
    #2774 read its end, 0, as the first index); each boolean argument flipped
    (``flip-ceil_mode``); and a float input holding -inf at every other element
    (``neg-inf``: the value attention masks carry; ``triu`` lowered as ``x - band_part(x)``
    made it NaN, PR #2771). Positional arguments are named by the op's ATen schema; an
    op without one has only its keyword arguments moved. Each: ``(axis, input tensor,
    args, kwargs)``, the tensor OpInfo's own unless the axis moves its values."""
    names = _positional_names(info, len(args))
    rank = getattr(tensor, "ndim", 0)
    negative_args = [_negative_dims(a, rank) if name in DIM_ARGUMENTS else a
                     for name, a in zip(names, args, strict=True)]
    negative_kwargs = {k: _negative_dims(v, rank) if k in DIM_ARGUMENTS else v
                       for k, v in kwargs.items()}
    if rank and (negative_args != list(args) or negative_kwargs != kwargs):
        yield "neg-dims", tensor, negative_args, negative_kwargs
    window = _start_from_the_end(names, args)
    if window is not None:
        yield "neg-start", tensor, window, dict(kwargs)
    for position, (name, value) in enumerate(zip(names, args, strict=True)):
        if isinstance(value, bool):
            flipped = [*args[:position], not value, *args[position + 1:]]
            yield f"flip-{name or position}", tensor, flipped, dict(kwargs)
    for key, value in kwargs.items():
        if isinstance(value, bool):
            yield f"flip-{key}", tensor, list(args), {**kwargs, key: not value}
    masked = _minus_infinity_at_every_other(tensor)
    if masked is not None:
        yield "neg-inf", masked, list(args), dict(kwargs)


def _start_from_the_end(names: Sequence[str], args: Sequence[Any]) -> list[Any] | None:
    """``args`` with a window's ``start`` set to ``-length`` (the window ending at the
    end, counted from it) where the op takes a positive integer ``start`` and
    ``length``; None otherwise."""
    if "start" not in names or "length" not in names:
        return None
    start, length = names.index("start"), names.index("length")
    value = args[length]
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        return None
    return [-value if position == start else a for position, a in enumerate(args)]


def _minus_infinity_at_every_other(tensor: Any) -> Any:
    """A copy of a float tensor of two or more elements with -inf at its even flat
    positions; None for any other argument."""
    import torch

    if not isinstance(tensor, torch.Tensor) or not tensor.is_floating_point() \
            or tensor.numel() < 2:
        return None
    masked = tensor.detach().clone()
    masked.view(-1)[::2] = float("-inf")
    return masked


def _positional_names(info: Any, count: int) -> list[str]:
    """The names of an op's first ``count`` arguments after its input, from the first
    ATen schema of its name that takes that many (no ``out=``); "" each when none does."""
    import torch

    aten = info.name.rpartition(".")[2]
    for schema in torch._C._jit_get_schemas_for_operator(f"aten::{aten}"):
        arguments = [a.name for a in schema.arguments]
        if "out" not in arguments and len(arguments) > count:
            return arguments[1:count + 1]
    return [""] * count


def _negative_dims(value: Any, rank: int) -> Any:
    """A dimension (or a list or tuple of them) counted from the end of a rank-``rank``
    tensor; anything else as it is."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < rank:
        return value - rank
    if isinstance(value, (list, tuple)) and value and all(
            isinstance(v, int) and not isinstance(v, bool) for v in value):
        return type(value)(_negative_dims(v, rank) for v in value)
    return value


def sample_of(info: Any, function: str, index: str, tensor: Any, args: Sequence[Any],
              kwargs: dict[str, Any], *, one: bool = False, values: str = "") -> OpSample | str:
    """One OpInfo sample (its input ``tensor``, further ``args`` and ``kwargs``) as an
    :class:`OpSample`, or why it cannot be one. Its rank-0 tensors after the first
    argument are constants (a Core ML input has a rank); ``one`` sets them to 1 — the
    divisor, exponent or factor a converter folds (``x % 1``, ``x // 1``), which
    OpInfo's random scalars never are. ``values`` says how ``tensor``'s values were
    moved from OpInfo's (:func:`mutations`)."""
    inputs: dict[str, np.ndarray] = {}
    try:
        written = [_argument(tensor, inputs),
                   *(_argument(a, inputs, scalars=True, one=one) for a in args)]
        keywords = [f"{k}={_argument(v, inputs, scalars=True, one=one)}"
                    for k, v in kwargs.items()]
    except _Unsupported as why:
        return f"{op_name(info)} sample {index}: {why}"
    if not inputs:
        return f"{op_name(info)} sample {index}: no tensor input"
    return OpSample(info.name, info.variant_test_name, index,
                    f"{function}({', '.join([*written, *keywords])})", inputs, values)


#: how a rank-0 constant starts in a call's text
_SCALAR = "torch.tensor("


class _Unsupported(Exception):
    pass


def _argument(value: Any, inputs: dict[str, np.ndarray], *, scalars: bool = False,
              one: bool = False) -> str:
    """The source text of one argument: a tensor becomes the next named input (a rank-0
    one, where ``scalars`` allows, a constant: 1 when ``one``), a literal its ``repr``;
    anything else is :class:`_Unsupported`."""
    import torch

    if isinstance(value, torch.Tensor):
        if value.is_complex() or value.layout != torch.strided:
            raise _Unsupported("complex or sparse tensor")
        if value.dim() == 0 and scalars:
            scalar = 1 if one else value.item()
            return f"{_SCALAR}{_nested(scalar)!r}, dtype={value.dtype})"
        if value.dim() == 0 or value.numel() == 0:
            raise _Unsupported("rank-0 or empty tensor")
        if value.numel() > MAX_ELEMENTS:
            raise _Unsupported(f"tensor of {value.numel()} elements")
        name = f"x{len(inputs)}"
        inputs[name] = value.detach().cpu().numpy().copy()
        return name
    if isinstance(value, (list, tuple)):
        items = [_argument(v, inputs, scalars=scalars, one=one) for v in value]
        if isinstance(value, tuple):
            return f"({', '.join(items)}{',' if len(items) == 1 else ''})"
        return f"[{', '.join(items)}]"
    if isinstance(value, torch.dtype):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return f"float({str(value)!r})"
    if value is None or isinstance(value, (bool, int, float, str)):
        return repr(value)
    raise _Unsupported(f"argument of type {type(value).__name__}")


def _tensor_literal(array: np.ndarray) -> str:
    """``torch.tensor(...)`` of exactly these values (float32 values are exact as
    Python floats; non-finite ones are spelled out)."""
    values = repr(_nested(array.tolist()))
    return f"torch.tensor({values}, dtype=torch.{array.dtype.name})"


def _nested(value: Any) -> Any:
    if isinstance(value, list):
        return [_nested(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return _Literal(f"float({str(value)!r})")
    return value


class _Literal:
    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def first_of_each_form(samples: Iterable[OpSample]) -> list[OpSample]:
    """The first sample of each :attr:`~OpSample.form`, in order."""
    seen: dict[str, OpSample] = {}
    for sample in samples:
        seen.setdefault(sample.form, sample)
    return list(seen.values())


def _shrunk(index: str) -> str:
    return index if index.endswith(":shrunk") else f"{index}:shrunk"
