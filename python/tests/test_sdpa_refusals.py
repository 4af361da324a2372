"""The frontend's SDPA keywords dnngraph does not have: accepted unset, refused when set with a
NotSupportedError that names the keyword and says why. Like the frontend, the node is made and
the refusal comes from validate() (frontend-written code catches it around the build steps)."""

import numpy as np
import pytest

import dnngraph as cudnn
from conftest import tensor_of

REFUSED = {
    "block_mask": "no such input yet",
    "softmax_precision": "Python kernels",
    "attn_scale_prefolded": "Python kernels",
    "kv_mask": "Python kernels",
}


def graph_and_qkv(rng):
    g = cudnn.pygraph(handle=cudnn.create_handle(device="cpu"),
                      io_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT)
    q = rng.standard_normal((1, 2, 4, 8)).astype(np.float32)
    return g, [tensor_of(g, q, n) for n in "QKV"], q


@pytest.mark.parametrize("kw", sorted(REFUSED))
def test_set_is_refused_with_a_reason(rng, kw):
    g, (Q, K, V), q = graph_and_qkv(rng)
    value = True if kw == "attn_scale_prefolded" else (
        64 if kw.startswith(("max_total", "paged_attention_max")) else tensor_of(g, q, "X"))
    O, _ = g.sdpa(q=Q, k=K, v=V, **{kw: value})
    O.set_output(True)
    with pytest.raises(cudnn.NotSupportedError, match=rf"sdpa\({kw}=\.\.\.\).*{REFUSED[kw]}"):
        g.validate()
    with pytest.raises(cudnn.NotSupportedError, match=rf"sdpa\({kw}=\.\.\.\)"):
        g.build()


def test_unset_is_accepted(rng):
    g, (Q, K, V), _ = graph_and_qkv(rng)
    unset = {k: (False if k == "attn_scale_prefolded" else None) for k in REFUSED}
    O, _ = g.sdpa(q=Q, k=K, v=V, **unset)
    O.set_output(True)
    g.validate()
