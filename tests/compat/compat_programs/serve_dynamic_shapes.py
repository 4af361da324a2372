"""Serving: one SDPA description for every shape. A causal bf16 SDPA built for 21 different
(batch, sequence) shapes with dynamic shapes on (pygraph(is_dynamic_shape_enabled=True)) and one
shared kernel cache (create_kernel_cache), as a serving engine meets new batch and prompt sizes:
the first shape compiles, the 20 after it should reuse what it compiled. Every shape's output
is checked; the notes give the first shape's build time and the total of the 20 others."""

import math
import time

import numpy as np

from compat_harness import Result
from compat_programs import _serve

SHAPES = [(2, 128), (1, 64), (3, 96), (4, 256), (1, 200), (2, 33), (5, 128), (3, 17),
          (1, 512), (4, 64), (2, 300), (6, 48), (1, 1), (3, 160), (2, 72), (4, 128), (1, 384),
          (5, 40), (2, 240), (3, 8), (7, 96)]


def one(h, cache, b, s, hq=4, hk=2, d=64):
    cudnn = h.cudnn
    scale = 1.0 / math.sqrt(d)
    q = h.randn((b, hq, s, d), "bfloat16")
    k, v = h.randn((b, hk, s, d), "bfloat16"), h.randn((b, hk, s, d), "bfloat16")
    t0 = time.perf_counter()
    g = _serve.graph(h, kernel_cache=cache, is_dynamic_shape_enabled=True)
    Q, K, V = g.tensor_like(q), g.tensor_like(k), g.tensor_like(v)
    O, _ = g.sdpa(name="sdpa", q=Q, k=K, v=V, generate_stats=False, attn_scale=scale,
                  use_causal_mask=True)
    O.set_output(True).set_dim([b, hq, s, d]).set_stride([hq * s * d, s * d, d, 1])
    O.set_data_type(cudnn.data_type.BFLOAT16)
    g.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    build_s = time.perf_counter() - t0
    o = h.empty((b, hq, s, d), "bfloat16")
    pack = {Q: q, K: k, V: v, O: o}
    ws = h.workspace(g)
    g.execute(pack, ws)
    h.sync()
    qf, kf, vf = h.numpy(q), h.numpy(k), h.numpy(v)
    ref = np.stack([_serve.attend(qf[i], kf[i], vf[i], scale, "top_left") for i in range(b)])
    return o, ref, build_s, lambda: g.execute(pack, ws)


def run(h):
    cache = h.cudnn.create_kernel_cache()
    outputs, refs, builds = {}, {}, []
    again = None
    for b, s in SHAPES:
        o, ref, build_s, ex = one(h, cache, b, s)
        outputs[f"O_b{b}_s{s}"], refs[f"O_b{b}_s{s}"] = o, ref
        builds.append(build_s)
        again = again or ex
    first, rest = builds[0] * 1e3, sum(builds[1:]) * 1e3
    notes = {"first build": f"{first:.1f} ms",
             "20 other shapes": f"{rest:.1f} ms ({rest / max(first, 1e-9):.2f}x the first)"}
    return Result(outputs, refs, 2e-2, again, notes=notes)
