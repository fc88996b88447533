"""lstm / gru / rnn kernels against torch.nn recurrent layers (weights re-laid out
into the MIL gate orders), plus attention and random kernels."""

from __future__ import annotations

import numpy as np
import pytest

from nebisect.mil.kernels import KernelContext, get_kernel
from nebisect.mil.single_op import build_op, inferred_outputs, kernel_arguments, run_kernel

torch = pytest.importorskip("torch")
RNG = np.random.default_rng(23)
SEQ, BATCH, IN, HID = 5, 3, 4, 6


def _ifzo_to_ifoz(w):
    i, f, z, o = np.split(w, 4)
    return np.concatenate([i, f, o, z])


def _state(module):
    return {k: v.detach().numpy().astype(np.float32) for k, v in module.state_dict().items()}


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("output_sequence", [False, True])
def test_lstm_matches_torch(direction, output_sequence):
    torch.manual_seed(0)
    both = direction == "bidirectional"
    module = torch.nn.LSTM(IN, HID, bidirectional=both).double()
    s = _state(module)
    x = RNG.standard_normal((SEQ, BATCH, IN)).astype(np.float32)
    dirs = 2 if both else 1
    h0 = RNG.standard_normal((dirs, BATCH, HID)).astype(np.float32)
    c0 = RNG.standard_normal((dirs, BATCH, HID)).astype(np.float32)
    kwargs = {
        "x": x,
        "initial_h": np.concatenate(list(h0), -1),
        "initial_c": np.concatenate(list(c0), -1),
        "weight_ih": _ifzo_to_ifoz(s["weight_ih_l0"]),
        "weight_hh": _ifzo_to_ifoz(s["weight_hh_l0"]),
        "bias": _ifzo_to_ifoz(s["bias_ih_l0"] + s["bias_hh_l0"]),
        "direction": direction,
        "output_sequence": output_sequence,
    }
    if both:
        kwargs.update(
            weight_ih_back=_ifzo_to_ifoz(s["weight_ih_l0_reverse"]),
            weight_hh_back=_ifzo_to_ifoz(s["weight_hh_l0_reverse"]),
            bias_back=_ifzo_to_ifoz(s["bias_ih_l0_reverse"] + s["bias_hh_l0_reverse"]),
        )
    out, h, c = run_kernel(build_op("lstm", "iOS17", **kwargs))
    with torch.no_grad():
        module.load_state_dict({k: torch.tensor(v, dtype=torch.float64) for k, v in s.items()})
        feed = np.flip(x, 0).copy() if direction == "reverse" else x
        t_out, (t_h, t_c) = module(torch.tensor(feed, dtype=torch.float64),
                                   (torch.tensor(h0, dtype=torch.float64),
                                    torch.tensor(c0, dtype=torch.float64)))
    t_out = t_out.numpy()
    if not output_sequence:
        last = t_out[-1:]
        if both:
            last = np.concatenate([t_out[-1:, :, :HID], t_out[:1, :, HID:]], -1)
        t_out = last
    np.testing.assert_allclose(out, t_out, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(h, np.concatenate(list(t_h.numpy()), -1), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(c, np.concatenate(list(t_c.numpy()), -1), rtol=1e-6, atol=1e-6)


def test_lstm_peephole_and_clip_follow_the_definition():
    w_ih = RNG.standard_normal((4 * HID, IN)).astype(np.float32)
    w_hh = RNG.standard_normal((4 * HID, HID)).astype(np.float32)
    peep = RNG.standard_normal(3 * HID).astype(np.float32)
    x = RNG.standard_normal((SEQ, 1, IN)).astype(np.float32) * 3
    zeros = np.zeros((1, HID), np.float32)
    _, h, c = run_kernel(build_op("lstm", "iOS17", x=x, initial_h=zeros, initial_c=zeros,
                                  weight_ih=w_ih, weight_hh=w_hh, peephole=peep,
                                  clip=np.float32(0.5)))
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    hh, cc = np.zeros(HID), np.zeros(HID)
    p_i, p_f, p_o = np.split(peep.astype(np.float64), 3)
    for step in x[:, 0].astype(np.float64):
        g = w_ih @ step + w_hh @ hh
        i = sig(g[:HID] + cc * p_i)
        f = sig(g[HID : 2 * HID] + cc * p_f)
        cc = np.clip(f * cc + i * np.tanh(g[3 * HID :]), -0.5, 0.5)
        hh = sig(g[2 * HID : 3 * HID] + cc * p_o) * np.tanh(cc)
    np.testing.assert_allclose(h[0], hh, rtol=1e-6)
    np.testing.assert_allclose(c[0], cc, rtol=1e-6)


def _rzn_to_ron(w):
    r, z, n = np.split(w, 3)
    return np.concatenate([r, n, z])


def test_gru_reset_after_matches_torch():
    torch.manual_seed(1)
    module = torch.nn.GRU(IN, HID).double()
    s = _state(module)
    x = RNG.standard_normal((SEQ, BATCH, IN)).astype(np.float32)
    h0 = RNG.standard_normal((BATCH, HID)).astype(np.float32)
    out, h = run_kernel(build_op(
        "gru", "iOS18", x=x, initial_h=h0, weight_ih=_rzn_to_ron(s["weight_ih_l0"]),
        weight_hh=_rzn_to_ron(s["weight_hh_l0"]), bias=_rzn_to_ron(s["bias_hh_l0"]),
        input_bias=_rzn_to_ron(s["bias_ih_l0"]), reset_after=True, output_sequence=True))
    with torch.no_grad():
        module.load_state_dict({k: torch.tensor(v, dtype=torch.float64) for k, v in s.items()})
        t_out, t_h = module(torch.tensor(x, dtype=torch.float64),
                            torch.tensor(h0[None], dtype=torch.float64))
    np.testing.assert_allclose(out, t_out.numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(h, t_h.numpy()[0], rtol=1e-6, atol=1e-6)


def test_gru_default_resets_before_the_hidden_matmul():
    w_ih = RNG.standard_normal((3 * HID, IN)).astype(np.float32)
    w_hh = RNG.standard_normal((3 * HID, HID)).astype(np.float32)
    b = RNG.standard_normal(3 * HID).astype(np.float32)
    x = RNG.standard_normal((2, 1, IN)).astype(np.float32)
    h0 = RNG.standard_normal((1, HID)).astype(np.float32)
    _, h = run_kernel(build_op("gru", "iOS17", x=x, initial_h=h0, weight_ih=w_ih,
                               weight_hh=w_hh, bias=b, direction="reverse"))
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    hh = h0[0].astype(np.float64)
    w_r, w_o, w_z = np.split(w_ih.astype(np.float64), 3)
    r_r, r_o, r_z = np.split(w_hh.astype(np.float64), 3)
    b_r, b_o, b_z = np.split(b.astype(np.float64), 3)
    for step in x[::-1, 0].astype(np.float64):
        z = sig(w_z @ step + r_z @ hh + b_z)
        r = sig(w_r @ step + r_r @ hh + b_r)
        o = np.tanh(w_o @ step + r_o @ (r * hh) + b_o)
        hh = (1 - z) * o + z * hh
    np.testing.assert_allclose(h[0], hh, rtol=1e-6)


def test_rnn_matches_torch():
    torch.manual_seed(2)
    module = torch.nn.RNN(IN, HID).double()
    s = _state(module)
    x = RNG.standard_normal((SEQ, BATCH, IN)).astype(np.float32)
    h0 = RNG.standard_normal((BATCH, HID)).astype(np.float32)
    out, h = run_kernel(build_op("rnn", "iOS17", x=x, initial_h=h0, weight_ih=s["weight_ih_l0"],
                                 weight_hh=s["weight_hh_l0"],
                                 bias=s["bias_ih_l0"] + s["bias_hh_l0"], output_sequence=True))
    with torch.no_grad():
        module.load_state_dict({k: torch.tensor(v, dtype=torch.float64) for k, v in s.items()})
        t_out, t_h = module(torch.tensor(x, dtype=torch.float64),
                            torch.tensor(h0[None], dtype=torch.float64))
    np.testing.assert_allclose(out, t_out.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(h, t_h.numpy()[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mask_kind", [None, "bool", "float"])
def test_attention_matches_value_inference(mask_kind):
    q = RNG.standard_normal((2, 3, 4, 8)).astype(np.float32)
    k = RNG.standard_normal((2, 3, 5, 8)).astype(np.float32)
    v = RNG.standard_normal((2, 3, 5, 6)).astype(np.float32)
    kwargs = {"query": q, "key": k, "value": v}
    if mask_kind == "bool":
        kwargs["attn_mask"] = RNG.random((4, 5)) > 0.3
        kwargs["attn_mask"][:, 0] = True
    elif mask_kind == "float":
        kwargs["attn_mask"] = RNG.standard_normal((4, 5)).astype(np.float32)
    op = build_op("scaled_dot_product_attention", "iOS18", **kwargs)
    (out,) = run_kernel(op)
    np.testing.assert_allclose(out, inferred_outputs(op)[0], rtol=1e-5, atol=1e-6)


def test_naive_attention_overflows_in_fp16():
    q = np.full((1, 1, 4), 8.0, np.float16)
    op = build_op("scaled_dot_product_attention", "iOS18", query=q[None], key=q[None],
                  value=np.ones((1, 1, 1, 4), np.float16))
    with np.errstate(all="ignore"):  # as in the interpreter
        (careful,) = run_kernel(op, dtype=np.float16)
        (naive,) = run_kernel(op, dtype=np.float16, variants=("naive",))
    np.testing.assert_allclose(careful, 1.0)
    assert np.isnan(naive).all()  # exp(128) = inf in fp16, inf / inf = nan


def test_random_degenerate_distributions_are_exact():
    shape = np.array([2, 3], np.int32)
    (ones,) = run_kernel(build_op("random_bernoulli", "iOS17", shape=shape, prob=np.float32(1.0)))
    (mean,) = run_kernel(build_op("random_normal", "iOS17", shape=shape, mean=np.float32(2.5),
                                  stddev=np.float32(0.0)))
    (low,) = run_kernel(build_op("random_uniform", "iOS17", shape=shape, low=np.float32(-1.0),
                                 high=np.float32(-1.0)))
    np.testing.assert_array_equal(ones, np.ones((2, 3)))
    np.testing.assert_array_equal(mean, np.full((2, 3), 2.5))
    np.testing.assert_array_equal(low, np.full((2, 3), -1.0))
    logits = np.array([[-1e9, 0.0, -1e9]], np.float32)
    (picks,) = run_kernel(build_op("random_categorical", "iOS17", x=logits, size=4, seed=3))
    np.testing.assert_array_equal(picks, [[1, 1, 1, 1]])


def test_recurrent_scaled_tanh_uses_its_defaults_and_unknown_activations_are_errors():
    from nebisect.errors import NebisectError

    kwargs = {"x": RNG.standard_normal((SEQ, 1, IN)).astype(np.float32),
              "initial_h": np.zeros((1, HID), np.float32),
              "weight_ih": RNG.standard_normal((HID, IN)).astype(np.float32),
              "weight_hh": RNG.standard_normal((HID, HID)).astype(np.float32)}
    (_, tanh_h) = run_kernel(build_op("rnn", "iOS17", activation="tanh", **kwargs))
    (_, scaled_h) = run_kernel(build_op("rnn", "iOS17", activation="scaled_tanh", **kwargs))
    np.testing.assert_array_equal(tanh_h, scaled_h)
    op = build_op("rnn", "iOS17", **kwargs)
    fn = get_kernel("rnn")
    args = kernel_arguments(op)
    args["activation"] = "softsign"
    with pytest.raises(NebisectError, match="softsign"):
        fn(KernelContext(op=op), **args)
