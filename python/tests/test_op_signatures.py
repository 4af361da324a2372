"""The pygraph op methods show their real parameters: inspect.signature, help() and IDEs see the
frontend's positional names, keywords and defaults (not *args, **kwargs), and a call written
from that signature runs."""

import inspect
import pydoc

import numpy as np
import pytest

import dnngraph as cudnn

_P = inspect.Parameter


def _params(method):
    return inspect.signature(method).parameters


@pytest.fixture
def graph():
    return cudnn.pygraph(handle=cudnn.create_handle(device="cpu"), name="sig",
                         io_data_type=cudnn.data_type.FLOAT)


def test_layernorm_signature_names_and_defaults(graph):
    p = _params(graph.layernorm)  # bound: no self
    assert list(p)[:4] == ["input", "scale", "bias", "epsilon"]
    assert all(p[n].kind == _P.POSITIONAL_OR_KEYWORD and p[n].default is _P.empty
               for n in ("input", "scale", "bias", "epsilon"))
    assert p["norm_forward_phase"].kind == _P.KEYWORD_ONLY
    assert p["norm_forward_phase"].default is _P.empty
    assert p["compute_data_type"].default == cudnn.data_type.NOT_SET
    assert p["name"].default == ""
    assert not any(q.kind in (_P.VAR_POSITIONAL, _P.VAR_KEYWORD) for q in p.values())
    assert list(_params(cudnn.pygraph.layernorm))[0] == "self"


@pytest.mark.parametrize("op, expect", [
    ("matmul", {"A": _P.empty, "B": _P.empty, "compute_data_type": cudnn.data_type.NOT_SET,
                "padding": None, "name": ""}),
    # bias=None precedes epsilon (the frontend's order): shown required, as a positional call
    # gives it
    ("rmsnorm", {"input": _P.empty, "scale": _P.empty, "bias": _P.empty, "epsilon": _P.empty}),
    ("max", {"input0": _P.empty, "input1": _P.empty}),  # the frontend's names, not a / b
    ("cmp_gt", {"input": _P.empty, "comparison": _P.empty}),
    ("relu_backward", {"loss": _P.empty, "input": _P.empty, "negative_slope": None}),
    ("conv_fprop", {"image": _P.empty, "weight": _P.empty, "padding": None, "stride": None,
                    "convolution_mode": None}),
    ("sdpa", {"q": _P.empty, "k": _P.empty, "v": _P.empty, "is_inference": None,
              "generate_stats": None, "attn_scale": None, "use_causal_mask": False,
              "diagonal_band_left_bound": None, "sliding_window_length": None}),
    ("reshape", {"input": _P.empty, "reshape_mode": None, "name": ""}),
    ("concatenate", {"inputs": _P.empty, "axis": _P.empty, "in_place_index": None}),
])
def test_op_signature_lists_frontend_parameters(graph, op, expect):
    p = _params(getattr(graph, op))
    for name, default in expect.items():
        assert name in p, f"{op}: {name} missing from {inspect.signature(getattr(graph, op))}"
        assert p[name].default == default or p[name].default is default, (op, name)
    if op == "reshape":
        assert "logical" not in p  # set from reshape_mode
    if op == "relu_backward":
        assert "mode" not in p and "alpha" not in p  # fixed by the form / not its keyword
    if op == "sdpa":
        assert "left_bound" not in p  # shown under the frontend's name


def test_every_op_method_has_a_real_signature_covering_the_native_keywords():
    native = cudnn._dnngraph.pygraph
    for fe, (nat, pos, renames, fixed) in native._frontend_call_forms.items():
        p = _params(getattr(cudnn.pygraph, fe))
        assert not any(q.kind in (_P.VAR_POSITIONAL, _P.VAR_KEYWORD) for q in p.values()), fe
        assert tuple(p)[1:len(pos) + 1] == tuple(pos), fe
        text = native.__dict__[nat].__nb_signature__[0][0]
        shown = set(p) | {renames.get(n, n) for n in p} | set(fixed) | {"self", "logical",
                                                                      "left_bound",
                                                                      "right_bound"}
        for part in text[text.index("(") + 1:text.rindex(") ->")].split(", "):
            name = part.split(":")[0].strip()
            if name.isidentifier() and not fixed:
                assert name in shown, f"{fe}: native keyword {name} not in its signature"


def test_help_text_shows_parameters_and_docstring(graph):
    for op in ("layernorm", "matmul", "sdpa", "gelu"):
        text = pydoc.render_doc(getattr(graph, op), renderer=pydoc.plaintext)
        assert "*args" not in text and "**kwargs" not in text, text
        assert "Parameters:" in text and "Returns:" in text, text
    text = pydoc.render_doc(graph.layernorm, renderer=pydoc.plaintext)
    assert "layernorm(input, scale, bias, epsilon, *, norm_forward_phase," in text, text
    assert "epsilon: Tensor | float" in text, text


def test_call_written_from_the_signature_runs(graph):
    rng = np.random.default_rng(11)
    x = rng.standard_normal((2, 3, 8), dtype=np.float32)
    w = rng.standard_normal((1, 1, 8), dtype=np.float32)
    X, W = graph.tensor_like(x, "x"), graph.tensor_like(w, "w")
    sig = inspect.signature(graph.rmsnorm)
    bound = sig.bind(X, W, None, 1e-5, norm_forward_phase=cudnn.norm_forward_phase.INFERENCE)
    Y, inv = graph.rmsnorm(*bound.args, **bound.kwargs)
    assert inv is None
    Y.set_output(True)
    graph.build()
    y = np.full_like(x, np.nan)
    graph.execute({X: x, W: w, Y: y}, np.empty(graph.get_workspace_size(), np.uint8))
    x64 = x.astype(np.float64)
    ref = x64 / np.sqrt((x64 * x64).mean(-1, keepdims=True) + 1e-5) * w
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)
