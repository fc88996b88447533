"""The idioms pattern programs are made of, each as users write it in models.

Every idiom takes the stream in the grammar's form (rank 3, float32, ``(batch, length,
width)``, width a multiple of 4, length at least 2 and possibly flexible) and leaves it
in that form, so any chain of them is a program torch runs. Sizes that depend on the
length are read from ``.shape`` (a flexible length is not a number); layers are made in
``__init__`` after the module seeds torch, so one program has one set of weights.
"""

from __future__ import annotations

from nebisect.patterns.grammar import Builder, Choices, Tensor, idiom

# -- in-place writes through views and slices ------------------------------------------


@idiom("slice_assign", "in-place")
def slice_assign(b: Builder, x: Tensor, c: Choices) -> Tensor:
    """``y[..., j] = 5.0`` on a clone: an element written through an indexing view."""
    column = c.integer(0, x.width - 1)
    value = c.pick(("5.0", "-2.5"))
    return x.renamed(b.let("w", f"{{out}} = {x.name}.clone()",
                           f"{{out}}[..., {column}] = {value}"))


def _span(x: Tensor, c: Choices) -> tuple[int, int]:
    """A non-empty slice ``low:high`` of the stream's width."""
    low = c.integer(0, x.width - 2)
    return low, c.integer(low + 1, x.width)


@idiom("slice_fill", "in-place")
def slice_fill(b: Builder, x: Tensor, c: Choices) -> Tensor:
    """``fill_`` through a slice of the result of an ``add``."""
    low, high = _span(x, c)
    value = c.pick(("0.0", "1.5"))
    return x.renamed(b.let("f", f"{{out}} = {x.name} + 1.0",
                           f"{{out}}[:, :, {low}:{high}].fill_({value})"))


@idiom("slice_update", "in-place")
def slice_update(b: Builder, x: Tensor, c: Choices) -> Tensor:
    """A slice assigned from a computation on the same slice (``index_put`` on a view)."""
    low, high = _span(x, c)
    return x.renamed(b.let("u", f"{{out}} = {x.name}.clone()",
                           f"{{out}}[..., {low}:{high}] = {x.name}[..., {low}:{high}] * 2.0"))


# -- masked and advanced indexing ------------------------------------------------------


@idiom("masked_rows", "indexing")
def masked_rows(b: Builder, x: Tensor, c: Choices) -> Tensor:
    """``x[mask]`` with a mask computed from the values (a data-dependent row count),
    summed back onto the stream."""
    column = c.integer(0, x.width - 1)
    return x.renamed(b.let("m", f"{{out}} = {x.name} + {x.name}[{x.name}[..., {column}] > 0]"
                                ".sum(0)"))


@idiom("gather_small_index", "indexing")
def gather_small_index(b: Builder, x: Tensor, c: Choices) -> Tensor:
    """``gather`` along the width with an index tensor built by index arithmetic,
    narrower than the input."""
    width = c.pick(x.narrower())
    step = c.integer(1, 3)
    index = (f"(torch.arange({width}) * {step} % {x.width})"
             f".expand({x.name}.shape[0], {x.name}.shape[1], {width})")
    return x.with_width(b.let("g", f"{{out}} = torch.gather({x.name}, 2, {index})"), width)


@idiom("column_mask", "indexing")
def column_mask(b: Builder, x: Tensor, c: Choices) -> Tensor:
    """``x[..., keep]`` with a constant boolean mask over the width."""
    width = c.pick(x.narrower())
    start = c.integer(0, x.width - width)
    keep = [start <= i < start + width for i in range(x.width)]
    return x.with_width(b.let("s", f"{{out}} = {x.name}[..., torch.tensor({keep!r})]"), width)


# -- shapes read off flexible dimensions -----------------------------------------------


@idiom("unflatten_length", "flexible shape")
def unflatten_length(b: Builder, x: Tensor, c: Choices) -> Tensor:
    """``unflatten`` of the length into ``(x.shape[1], 1)``, squeezed back."""
    return x.renamed(b.let("r", f"{{out}} = torch.unflatten({x.name}, 1, "
                                f"({x.name}.shape[1], 1)).squeeze(2)"))


@idiom("reshape_from_shape", "flexible shape")
def reshape_from_shape(b: Builder, x: Tensor, c: Choices) -> Tensor:
    """A reshape with ``-1`` and sizes read from ``.shape``: the width's pairs swapped."""
    batch, length = f"{x.name}.shape[0]", f"{x.name}.shape[1]"
    return x.renamed(b.let("r", f"{{out}} = {x.name}.reshape({batch}, -1, {x.width // 2}, 2)"
                                f".transpose(2, 3).reshape({batch}, {length}, {x.width})"))


@idiom("adaptive_pool", "flexible shape")
def adaptive_pool(b: Builder, x: Tensor, c: Choices) -> Tensor:
    """Adaptive average pooling to a narrower width; in 2-D, with the output size of the
    length read from ``.shape``."""
    width = c.pick(x.narrower())
    if c.pick(("1d", "2d")) == "1d":
        return x.with_width(b.let("p", f"{{out}} = F.adaptive_avg_pool1d({x.name}, {width})"),
                            width)
    return x.with_width(b.let("p", f"{{out}} = F.adaptive_avg_pool2d({x.name}.unsqueeze(1), "
                                   f"({x.name}.shape[1], {width})).squeeze(1)"), width)


# -- recurrent state carried -----------------------------------------------------------


@idiom("lstm_twice", "recurrent")
def lstm_twice(b: Builder, x: Tensor, c: Choices) -> Tensor:
    """An LSTM called twice, the second call starting from the state the first left."""
    hidden = c.pick(x.narrower()[:2])
    layers = c.integer(1, 2)
    lstm = b.layer("lstm", f"torch.nn.LSTM({x.width}, {hidden}, num_layers={layers}, "
                           "batch_first=True)")
    state = b.fresh("state")
    b.body.append(f"_, {state} = {lstm}({x.name})")
    return x.with_width(b.let("h", f"{{out}}, _ = {lstm}({x.name}, {state})"), hidden)


@idiom("lstm_cell_steps", "recurrent")
def lstm_cell_steps(b: Builder, x: Tensor, c: Choices) -> Tensor:
    """An ``LSTMCell`` stepped over the first positions, its state carried, the last
    hidden state added to every position."""
    hidden = c.pick(x.narrower()[:2])
    steps = c.integer(1, 2)
    cell = b.layer("cell", f"torch.nn.LSTMCell({x.width}, {hidden})")
    h, state = b.fresh("h"), b.fresh("c")
    b.body.append(f"{h} = {x.name}.new_zeros({x.name}.shape[0], {hidden})")
    b.body.append(f"{state} = {h}")
    for step in range(steps):
        b.body.append(f"{h}, {state} = {cell}({x.name}[:, {step}], ({h}, {state}))")
    return x.with_width(b.let("s", f"{{out}} = {x.name}[..., :{hidden}] + {h}.unsqueeze(1)"),
                        hidden)


# -- attention -------------------------------------------------------------------------


@idiom("sdpa_gqa", "attention")
def sdpa_gqa(b: Builder, x: Tensor, c: Choices) -> Tensor:
    """SDPA with grouped key/value heads (``enable_gqa``): fewer key/value heads than
    query heads, the keys and values a slice of the stream."""
    head = c.pick(tuple(d for d in (1, 2, 4) if x.width // d >= 2))
    heads = x.width // head
    groups = c.pick(tuple(h for h in range(1, heads) if heads % h == 0))
    causal = c.pick((False, True))
    batch, length = f"{x.name}.shape[0]", f"{x.name}.shape[1]"
    q = b.let("q", f"{{out}} = {x.name}.reshape({batch}, {length}, {heads}, {head})"
                   ".transpose(1, 2)")
    kv = b.let("kv", f"{{out}} = {x.name}[..., :{groups * head}].reshape({batch}, {length}, "
                     f"{groups}, {head}).transpose(1, 2)")
    attended = b.let("a", f"{{out}} = F.scaled_dot_product_attention({q}, {kv}, {kv}, "
                          f"is_causal={causal}, enable_gqa=True)")
    return x.renamed(b.let("o", f"{{out}} = {attended}.transpose(1, 2).reshape({batch}, "
                                f"{length}, {x.width})"))


@idiom("sdpa_mask", "attention")
def sdpa_mask(b: Builder, x: Tensor, c: Choices) -> Tensor:
    """SDPA with a causal mask built from the length: boolean, or additive with -inf."""
    length = f"{x.name}.shape[1]"
    mask = b.let("mask", f"{{out}} = torch.ones({length}, {length}, dtype=torch.bool).tril()")
    if c.pick(("bool", "additive")) == "additive":
        mask = b.let("mask", f"{{out}} = torch.zeros({length}, {length}).masked_fill("
                             f"~{mask}, float('-inf'))")
    return x.renamed(b.let("a", f"{{out}} = F.scaled_dot_product_attention({x.name}, "
                                f"{x.name}, {x.name}, attn_mask={mask})"))


@idiom("masked_softmax", "attention")
def masked_softmax(b: Builder, x: Tensor, c: Choices) -> Tensor:
    """``masked_fill(mask, -inf)`` then ``softmax``, the first column never masked."""
    keep = c.integer(1, x.width - 1)
    return x.renamed(b.let("sm", f"{{out}} = {x.name}.masked_fill(torch.arange({x.width}) >= "
                                 f"{keep}, float('-inf')).softmax(-1)"))


@idiom("mha_padding_mask", "dtype")
def mha_padding_mask(b: Builder, x: Tensor, c: Choices) -> Tensor:
    """``nn.MultiheadAttention`` with a key padding mask from ``zeros_like(...,
    dtype=torch.bool)``."""
    heads = c.pick(tuple(h for h in (1, 2, 4) if x.width % h == 0))
    mha = b.layer("mha", f"torch.nn.MultiheadAttention({x.width}, {heads}, batch_first=True)")
    pad = b.let("pad", f"{{out}} = torch.zeros_like({x.name}[..., 0], dtype=torch.bool)")
    return x.renamed(b.let("a", f"{{out}}, _ = {mha}({x.name}, {x.name}, {x.name}, "
                                f"key_padding_mask={pad})"))


# -- normalization and activation ------------------------------------------------------


@idiom("norm_variant", "normalization")
def norm_variant(b: Builder, x: Tensor, c: Choices) -> Tensor:
    """One of the normalizations models use, over the width or per channel."""
    kind = c.pick(("layer_norm", "rms_norm", "group_norm", "normalize", "instance_norm"))
    channels_first = f"{x.name}.transpose(1, 2)"
    if kind == "group_norm":
        expression = f"F.group_norm({channels_first}, {c.pick((1, 2, 4))}).transpose(1, 2)"
    elif kind == "instance_norm":
        expression = f"F.instance_norm({channels_first}).transpose(1, 2)"
    elif kind == "normalize":
        expression = f"F.normalize({x.name}, dim=-1)"
    else:
        expression = f"F.{kind}({x.name}, ({x.width},))"
    return x.renamed(b.let("n", f"{{out}} = {expression}"))


@idiom("prelu_channels", "normalization")
def prelu_channels(b: Builder, x: Tensor, c: Choices) -> Tensor:
    """A per-channel PReLU on a rank-3 input laid out channels first."""
    prelu = b.layer("prelu", f"torch.nn.PReLU({x.width})")
    b.init.append(f"{prelu}.weight.data = torch.linspace(-0.5, 0.5, {x.width})")
    return x.renamed(b.let("p", f"{{out}} = {prelu}({x.name}.transpose(1, 2)).transpose(1, 2)"))


# -- integer and boolean arithmetic with Python scalars --------------------------------


@idiom("addmm_scalars", "scalars")
def addmm_scalars(b: Builder, x: Tensor, c: Choices) -> Tensor:
    """``addmm`` with an integer ``beta`` or ``alpha``."""
    width = c.pick(x.narrower())
    beta, alpha = c.pick(("2", "1", "0.5")), c.pick(("1", "3"))
    weight = b.layer("w", f"torch.nn.Parameter(torch.randn({x.width}, {width}))")
    bias = b.layer("bias", f"torch.nn.Parameter(torch.randn({width}))")
    return x.with_width(b.let("mm", f"{{out}} = torch.addmm({bias}, {x.name}.reshape(-1, "
                                    f"{x.width}), {weight}, beta={beta}, alpha={alpha})"
                                    f".reshape({x.name}.shape[0], {x.name}.shape[1], {width})"),
                        width)


@idiom("integer_arithmetic", "scalars")
def integer_arithmetic(b: Builder, x: Tensor, c: Choices) -> Tensor:
    """The stream scaled to int32, integer arithmetic with Python ints, back to float."""
    operation = c.pick(("{q} // 3", "{q} % 3", "{q} * 3 + 1", "-{q} // 2"))
    q = b.let("q", f"{{out}} = ({x.name} * 8).to(torch.int32)")
    return x.renamed(b.let("i", f"{{out}} = ({operation.format(q=q)}).to(torch.float32) / 8"))


@idiom("boolean_select", "scalars")
def boolean_select(b: Builder, x: Tensor, c: Choices) -> Tensor:
    """Comparisons with Python scalars, combined and used as a select or a factor."""
    expression = c.pick((
        "torch.where({x} > 0.5, {x}, {x} * 0.5)",
        "(({x} > 0) & ({x} < 1)).to({x}.dtype) * {x}",
        "{x}.masked_fill({x} < -1, 0.0)",
        "({x} > 0).float() + {x}",
    ))
    return x.renamed(b.let("bs", f"{{out}} = {expression.format(x=x.name)}"))


# -- broadcasting chains graph passes fuse, dtype arguments ----------------------------


@idiom("broadcast_affine", "broadcast")
def broadcast_affine(b: Builder, x: Tensor, c: Choices) -> Tensor:
    """A per-channel ``mul`` then ``add`` (what a graph pass fuses into ``batch_norm``),
    over the last axis or channels first."""
    scale = b.layer("scale", f"torch.nn.Parameter(torch.linspace(0.5, 1.5, {x.width}))")
    shift = b.layer("shift", f"torch.nn.Parameter(torch.linspace(-1.0, 1.0, {x.width}))")
    if c.pick(("last", "channels")) == "last":
        return x.renamed(b.let("af", f"{{out}} = {x.name} * {scale} + {shift}"))
    return x.renamed(b.let("af", f"{{out}} = ({x.name}.transpose(1, 2) * {scale}[None, :, None]"
                                 f" + {shift}[None, :, None]).transpose(1, 2)"))


@idiom("dtype_argument", "dtype")
def dtype_argument(b: Builder, x: Tensor, c: Choices) -> Tensor:
    """An op given a ``dtype=`` argument, or a round trip through another dtype."""
    expression = c.pick((
        "torch.cumsum({x}, 1, dtype=torch.float32)",
        "{x} - {x}.sum(-1, keepdim=True, dtype=torch.float32) / {w}",
        "{x} + torch.ones_like({x}, dtype=torch.int32)",
        "{x}.to(torch.float16).to(torch.float32)",
        "F.softmax({x}, -1, dtype=torch.float32)",
    ))
    return x.renamed(b.let("d", f"{{out}} = {expression.format(x=x.name, w=x.width)}"))
