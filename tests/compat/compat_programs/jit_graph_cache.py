"""@cudnn.jit with the cudnn.graph context manager and @cudnn.graph_cache; uid-keyed packs."""

import numpy as np

from compat_harness import Result


def run(h):
    cudnn = h.cudnn
    builds = []

    @cudnn.graph_cache(key_fn=lambda n, c: (n, c))
    @cudnn.jit(heur_modes=[cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    def make(n, c):
        builds.append((n, c))
        with cudnn.graph(h.handle, io_data_type=cudnn.data_type.FLOAT) as (g, _):
            X = g.tensor(name="X", dim=[n, c, 1, 1], stride=[c, 1, c, c],
                         data_type=cudnn.data_type.FLOAT)
            S = g.tensor(name="S", dim=[1, 1, 1, 1], stride=[1, 1, 1, 1],
                         data_type=cudnn.data_type.FLOAT, is_pass_by_value=True)
            Y = g.sigmoid(input=g.scale(input=X, scale=S))
            Y.set_output(True).set_data_type(cudnn.data_type.FLOAT)
            return g, [X, S, Y]

    g, (x_uid, s_uid, y_uid) = make(8, 32)
    g_again, _ = make(8, 32)
    assert g_again is g and len(builds) == 1, "graph_cache rebuilt a cached graph"
    assert g.get_execution_plan_count() >= 1, "jit did not build"
    x = h.randn((8, 32, 1, 1), "float32")
    y = h.empty((8, 32, 1, 1), "float32")
    ws = h.workspace(g)
    pack = {x_uid: x, s_uid: h.host_scalar(2.0), y_uid: y}
    g.execute(pack, ws)
    ref = 1.0 / (1.0 + np.exp(-2.0 * h.numpy(x)))
    return Result({"Y": y}, {"Y": ref}, 1e-5, lambda: g.execute(pack, ws))
