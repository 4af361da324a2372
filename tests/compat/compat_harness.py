"""What the frontend-style programs in tests/compat run against.

``load()`` picks the implementation (COMPAT_IMPL=dnngraph, the default, or frontend = the cuDNN
frontend's ``cudnn`` package) and the device (CUDA when torch sees a GPU and COMPAT_DEVICE is not
"cpu"; the frontend needs one). Arrays are torch tensors when torch is installed, else numpy
arrays (CPU only), so the programs run in a CI without torch.

Each program module defines ``run(h)`` returning a Result: named outputs, their float64
references and a tolerance (``tol``, with per-output overrides in ``tols``); ``check`` compares
them. An output's error is its largest absolute difference divided by its own largest |reference|:
the tolerance scales with each output, so an output of small values is checked as closely as a
large one, and an output left at zero fails whatever its size.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Optional

import numpy as np

try:
    import torch

    if not hasattr(torch, "Tensor"):  # the repository's torch/ sources, not PyTorch
        torch = None
except ImportError:  # CI without torch: numpy arrays on the CPU
    torch = None


@dataclass
class Result:
    outputs: Dict[str, Any]
    reference: Dict[str, np.ndarray]
    tol: float
    execute: Optional[Callable[[], None]] = None  # one more execute(), for timing
    notes: Dict[str, str] = field(default_factory=dict)
    tols: Dict[str, float] = field(default_factory=dict)  # per output, instead of tol

    def tolerance(self, name: str) -> float:
        return self.tols.get(name, self.tol)


class Harness:
    """Arrays, handle and module for one implementation on one device."""

    def __init__(self, impl: str, device: str) -> None:
        self.impl, self.device = impl, device
        self.cudnn = importlib.import_module("cudnn" if impl == "frontend" else "dnngraph")
        if impl == "frontend":
            self.handle = self.cudnn.create_handle()
        else:
            self.handle = self.cudnn.create_handle(device=device)
        seed = int(os.environ.get("COMPAT_SEED", "1234"))
        self.rng = np.random.default_rng(seed)

    # ---- arrays ----
    def dtype(self, name: str) -> Any:
        """A dtype the array library understands ("float16", "float32", "bfloat16", ...)."""
        if torch is not None:
            return getattr(torch, name)
        if name == "bfloat16" or name.startswith("float8"):
            import ml_dtypes

            return getattr(ml_dtypes, name)
        return np.dtype(name)

    def array(self, values: np.ndarray, dtype: str = "float32",
              channels_last: bool = False) -> Any:
        """values (float64) as an array of dtype on the device; channels_last keeps dims
        N,C,(D,)H,W and lays C innermost."""
        if torch is not None:
            t = torch.from_numpy(np.ascontiguousarray(values)).to(getattr(torch, dtype))
            if channels_last:
                t = t.to(memory_format=torch.channels_last if t.dim() == 4
                         else torch.channels_last_3d)
            return t.to(self.device)
        a = values.astype(self.dtype(dtype))
        if channels_last:
            perm = (0,) + tuple(range(2, a.ndim)) + (1,)
            inv = np.argsort(perm)
            a = np.ascontiguousarray(a.transpose(perm)).transpose(inv)
        return a

    def randn(self, shape: Any, dtype: str = "float32", channels_last: bool = False,
              scale: float = 1.0) -> Any:
        return self.array(self.rng.standard_normal(tuple(shape)) * scale, dtype, channels_last)

    def empty(self, shape: Any, dtype: str = "float32", stride: Any = None) -> Any:
        """A NaN-poisoned output array."""
        if torch is not None:
            dt = getattr(torch, dtype)
            if stride is None:
                t = torch.empty(tuple(shape), dtype=dt, device=self.device)
            else:
                t = torch.empty_strided(tuple(shape), tuple(stride), dtype=dt, device=self.device)
            if t.is_floating_point() and t.element_size() == 1:
                t.view(torch.uint8).fill_(0xFF)  # NaN in every fp8 type
            elif t.is_floating_point():
                t.fill_(float("nan"))
            return t
        dt = np.dtype(self.dtype(dtype))
        span = 1 + sum((d - 1) * st for d, st in zip(shape, stride)) if stride else 0
        base = np.empty(span if stride else tuple(shape), dtype=dt)
        if np.issubdtype(dt, np.floating):
            base.fill(np.nan)
        elif dt.itemsize == 1 and dtype.startswith("float8"):
            base.view(np.uint8).fill(0xFF)  # NaN in every fp8 type
        if stride is None:
            return base
        a = np.lib.stride_tricks.as_strided(base, tuple(shape),
                                            tuple(st * dt.itemsize for st in stride))
        return a

    def workspace(self, graph: Any) -> Any:
        n = graph.get_workspace_size()
        if torch is not None:
            return torch.empty(max(n, 1), dtype=torch.uint8, device=self.device)
        return np.empty(max(n, 1), dtype=np.uint8)

    def host_scalar(self, value: float, dtype: str = "float32") -> Any:
        """A [1,1,1,1] host array: tensor_like makes it a pass-by-value tensor."""
        if torch is not None:
            return torch.full((1, 1, 1, 1), value, dtype=getattr(torch, dtype))
        return np.full((1, 1, 1, 1), value, dtype=self.dtype(dtype))

    def numpy(self, x: Any) -> np.ndarray:
        if torch is not None and isinstance(x, torch.Tensor):
            return x.detach().to("cpu", torch.float64).numpy()
        return np.asarray(x).astype(np.float64)

    def sync(self) -> None:
        if torch is not None and self.device != "cpu":
            torch.cuda.synchronize()


def load(impl: Optional[str] = None, device: Optional[str] = None) -> Harness:
    impl = impl or os.environ.get("COMPAT_IMPL", "dnngraph")
    if device is None:
        gpu = torch is not None and torch.cuda.is_available()
        device = "cuda" if gpu and os.environ.get("COMPAT_DEVICE", "") != "cpu" else "cpu"
    if impl == "frontend" and device == "cpu":
        raise RuntimeError("the cuDNN frontend needs a GPU (COMPAT_IMPL=frontend on a CPU)")
    return Harness(impl, device)


def relative_error(got: np.ndarray, ref: np.ndarray) -> float:
    """max |got - ref| over max |ref| (1 when the reference is all zeros)."""
    if not got.size:
        return 0.0
    scale = float(np.max(np.abs(ref)))
    return float(np.max(np.abs(got - ref))) / (scale if scale > 0 else 1.0)


def check(result: Result) -> Dict[str, float]:
    """Each output's error relative to its own largest |reference| (``relative_error``);
    AssertionError above the output's tolerance."""
    unknown = set(result.tols) - set(result.reference)
    assert not unknown, f"tolerances for outputs without a reference: {sorted(unknown)}"
    errors = {}
    for name, ref in result.reference.items():
        got = np.asarray(
            result.outputs[name] if isinstance(result.outputs[name], np.ndarray) else
            _np(result.outputs[name]), dtype=np.float64)
        assert got.shape == ref.shape, f"{name}: shape {got.shape}, expected {ref.shape}"
        assert not np.isnan(got).any(), f"{name}: NaN left in the output (not written)"
        err = relative_error(got, np.asarray(ref, dtype=np.float64))
        errors[name] = err
        tol = result.tolerance(name)
        assert err <= tol, f"{name}: error {err:.3g} above tolerance {tol}"
    return errors


def _np(x: Any) -> np.ndarray:
    if torch is not None and isinstance(x, torch.Tensor):
        return x.detach().to("cpu", torch.float64).numpy()
    return np.asarray(x, dtype=np.float64)
