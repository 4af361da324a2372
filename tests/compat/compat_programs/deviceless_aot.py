"""Deviceless (ahead-of-time) build in the frontend's form: create_device_properties(0) and its
JSON (serialize()), a pygraph(device_property=props) built with no handle, serialize(), then
deserialize(handle, data) onto the GPU and execute. The properties are read off a GPU, so on
the CPU the program does not run (returns None)."""

import json

import numpy as np

from compat_harness import Result


def run(h):
    if h.device == "cpu":
        return None
    cudnn = h.cudnn
    props = cudnn.create_device_properties(0)
    text = props.serialize()
    if isinstance(text, (list, bytes)):
        text = bytes(text).decode()
    info = json.loads(text)
    a, b = h.randn((2, 64, 32), "float16"), h.randn((2, 32, 48), "float16")
    g = cudnn.pygraph(device_property=props, io_data_type=cudnn.data_type.HALF,
                      intermediate_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT)
    A, B = g.tensor_like(a), g.tensor_like(b)
    Y = g.relu(input=g.matmul(A=A, B=B))
    Y.set_output(True).set_data_type(cudnn.data_type.HALF)
    g.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])  # no handle: for the target
    uids = (A.get_uid(), B.get_uid(), Y.get_uid())
    data = g.serialize()
    g2 = cudnn.pygraph(handle=h.handle)
    g2.deserialize(h.handle, data)
    y = h.empty((2, 64, 48), "float16")
    g2.execute({uids[0]: a, uids[1]: b, uids[2]: y}, h.workspace(g2))
    h.sync()
    ref = np.maximum(h.numpy(a) @ h.numpy(b), 0)
    return Result({"Y": y}, {"Y": ref}, 1e-2,
                  notes={"target": f"{info.get('deviceName')} deviceVer {info.get('deviceVer')}",
                         "serialized_bytes": str(len(data))})
