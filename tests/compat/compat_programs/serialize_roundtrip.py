"""serialize() a built graph, deserialize(handle, data) into a fresh pygraph, execute by uid."""

from compat_harness import Result
from compat_programs import _graph


def run(h):
    cudnn = h.cudnn
    a, b = h.randn((2, 16, 32), "float16"), h.randn((2, 32, 8), "float16")
    g = _graph.graph(h)
    A, B = g.tensor_like(a), g.tensor_like(b)
    Y = g.gelu(input=g.matmul(A=A, B=B))
    Y.set_output(True).set_data_type(cudnn.data_type.HALF)
    g.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    uids = (A.get_uid(), B.get_uid(), Y.get_uid())
    data = g.serialize()
    g2 = cudnn.pygraph(handle=h.handle)
    g2.deserialize(h.handle, data)
    g3 = cudnn.pygraph(handle=h.handle)
    g3.deserialize(list(data) if not isinstance(data, list) else data)
    y2, y3 = h.empty((2, 16, 8), "float16"), h.empty((2, 16, 8), "float16")
    ws = h.workspace(g2)
    g2.execute({uids[0]: a, uids[1]: b, uids[2]: y2}, ws)
    g3.execute({uids[0]: a, uids[1]: b, uids[2]: y3}, h.workspace(g3))
    from math import erf, sqrt

    import numpy as np

    c = h.numpy(a) @ h.numpy(b)
    ref = 0.5 * c * (1 + np.vectorize(erf)(c / sqrt(2)))
    return Result({"Y_handle_form": y2, "Y_list_form": y3}, {"Y_handle_form": ref,
                                                             "Y_list_form": ref}, 1e-2)
