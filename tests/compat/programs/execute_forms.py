"""_get_variant_pack_uids_sorted, execute with a tuple of buffers and tensor_uids, key() as int,
_execute_with_ptrs with raw addresses."""

import numpy as np

from tests.compat.harness import Result, torch


def _ptr(x):
    return x.data_ptr() if hasattr(x, "data_ptr") else x.ctypes.data


def run(h):
    cudnn = h.cudnn
    a, b = h.randn((1, 8, 16), "float32"), h.randn((1, 8, 16), "float32")
    g = cudnn.pygraph(handle=h.handle, io_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT)
    A, B = g.tensor_like(a), g.tensor_like(b)
    Y = g.add(a=g.exp(input=A), b=B)
    Y.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    g.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    assert isinstance(g.key(), int)
    uids = g._get_variant_pack_uids_sorted()
    assert set(uids) >= {A.get_uid(), B.get_uid(), Y.get_uid()}, uids
    y1, y2 = h.empty((1, 8, 16), "float32"), h.empty((1, 8, 16), "float32")
    ws = h.workspace(g)
    g.execute((a, b, y1), ws, tensor_uids=(A.get_uid(), B.get_uid(), Y.get_uid()))
    g._execute_with_ptrs({A.get_uid(): _ptr(a), B.get_uid(): _ptr(b), Y.get_uid(): _ptr(y2)},
                         _ptr(ws), h.handle)
    h.sync()
    ref = np.exp(h.numpy(a)) + h.numpy(b)
    return Result({"Y_tuple": y1, "Y_ptrs": y2}, {"Y_tuple": ref, "Y_ptrs": ref}, 1e-5)
