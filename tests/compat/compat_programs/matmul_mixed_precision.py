"""Mixed-precision batched matmul, as the frontend's users write it: A and B of int8, bfloat16 or
float16 (B column-major), each cast to the MMA type (bfloat16, float16 or float32) by an identity
pointwise op, then a float-accumulated matmul whose output has the MMA type. All 27 combinations,
one graph each; every result is checked against float64 on the cast inputs."""

import numpy as np

from compat_harness import Result

TYPES = ("int8", "bfloat16", "float16")
MMA = ("bfloat16", "float16", "float32")


def _round(v: np.ndarray, name: str) -> np.ndarray:
    """v (float64) rounded to the type `name`, back in float64 (bfloat16: nearest-even)."""
    if name == "bfloat16":
        bits = v.astype(np.float32).view(np.uint32).astype(np.uint64)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
        return bits.astype(np.uint32).view(np.float32).astype(np.float64)
    return v.astype(name).astype(np.float64)


def run(h):
    cudnn = h.cudnn
    b, m, n, k = 4, 16, 32, 64
    outputs, refs, graphs = {}, {}, []
    for ta in TYPES:
        for tb in TYPES:
            for tm in MMA:
                if ta == "int8":
                    av = h.rng.integers(-2, 3, (b, m, k)).astype(np.float64)
                else:
                    av = _round(h.rng.standard_normal((b, m, k)) * 2 - 0.5, ta)
                if tb == "int8":
                    bv = h.rng.integers(-2, 2, (b, n, k)).astype(np.float64)
                else:
                    bv = _round(h.rng.standard_normal((b, n, k)) * 3 - 1.25, tb)
                x = h.array(av, ta)
                w = h.array(bv, tb)  # [b, n, k] packed: its [b, k, n] view is column-major
                w = w.transpose(0, 2, 1) if isinstance(w, np.ndarray) else w.transpose(1, 2)
                g = cudnn.pygraph(handle=h.handle)
                A, B = g.tensor_like(x), g.tensor_like(w)
                Ac = g.identity(input=A, compute_data_type=cudnn.data_type.FLOAT)
                Ac.set_data_type(getattr(cudnn.data_type, _dt(tm)))
                Bc = g.identity(input=B, compute_data_type=cudnn.data_type.FLOAT)
                Bc.set_data_type(getattr(cudnn.data_type, _dt(tm)))
                C = g.matmul(name="matmul", A=Ac, B=Bc, compute_data_type=cudnn.data_type.FLOAT)
                C.set_output(True).set_data_type(getattr(cudnn.data_type, _dt(tm)))
                g.build([cudnn.heur_mode.A])
                y = h.empty((b, m, n), tm)
                ws = h.workspace(g)
                pack = {A: x, B: w, C: y}
                g.execute(pack, ws)
                graphs.append((g, pack, ws))
                key = f"{ta}x{tb}->{tm}"
                outputs[key] = y
                refs[key] = _round(_round(av, tm) @ _round(bv, tm).transpose(0, 2, 1), tm)
    g, pack, ws = graphs[-1]
    return Result(outputs, refs, 2e-2, lambda: g.execute(pack, ws))


def _dt(name: str) -> str:
    return {"bfloat16": "BFLOAT16", "float16": "HALF", "float32": "FLOAT"}[name]
