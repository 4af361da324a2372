"""cudnnGraphNotSupportedError is raised for a data type with no cuDNN twin."""

import numpy as np

from compat_harness import Result


def run(h):
    cudnn = h.cudnn
    raised = 0.0
    try:
        g = cudnn.pygraph(handle=h.handle, io_data_type=cudnn.data_type.FLOAT)
        X = g.tensor(name="X", dim=[4, 4], stride=[4, 1], data_type="no such type")
        Y = g.relu(input=X)
        Y.set_output(True)
        g.build([cudnn.heur_mode.A])
    except cudnn.cudnnGraphNotSupportedError:
        raised = 1.0
    return Result({"raised": np.array([raised])}, {"raised": np.array([1.0])}, 0.0)
