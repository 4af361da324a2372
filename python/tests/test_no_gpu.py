"""On a machine without a usable GPU, the default (cuda) handle fails with one clear message: why
in the user's terms (not the CUDA runtime's "driver version is insufficient") and the way to
the CPU reference engine, once."""

import os

import numpy as np
import pytest

import dnngraph as cudnn


def _gpu_present():
    if os.path.exists("/dev/nvidia0"):
        return True
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


pytestmark = pytest.mark.skipif(_gpu_present(), reason="a GPU is present")

_REASONS = ("no NVIDIA GPU or driver on this machine",  # no driver (this CI machine)
            "dnngraph was built without CUDA")  # the sanitizer tree


def _check(msg, prefix, hint):
    assert msg.startswith(prefix), msg
    assert any(msg[len(prefix):].startswith(r + "; ") for r in _REASONS), msg
    assert msg.count(hint) == 1, msg
    assert msg.endswith(hint), msg
    for cudart_words in ("insufficient", "Handle::create", "(use a"):
        assert cudart_words not in msg, msg


def test_create_handle_without_gpu_says_why_and_points_to_cpu():
    for device in ("cuda", "cuda:0"):
        with pytest.raises(cudnn.NotSupportedError) as e:
            cudnn.create_handle(device) if device != "cuda" else cudnn.create_handle()
        _check(str(e.value), "create_handle: cannot use cuda:0: ",
               'use create_handle(device="cpu") for the reference engine')
    assert cudnn.create_handle(device="cpu").device == "cpu"  # the way out works


def test_graph_without_handle_says_why_and_points_to_cpu():
    g = cudnn.pygraph(name="nohandle", io_data_type=cudnn.data_type.FLOAT)
    x = np.random.default_rng(3).standard_normal((1, 4, 4), dtype=np.float32)
    X = g.tensor_like(x, "x")
    Y = g.relu(input=X, name="act")
    Y.set_output(True)
    with pytest.raises(cudnn.NotSupportedError) as e:
        g.build()
    _check(str(e.value), "this graph has no handle and the default one (cuda:0) cannot be made: ",
           'pass pygraph(handle=create_handle(device="cpu")) for the reference engine')
