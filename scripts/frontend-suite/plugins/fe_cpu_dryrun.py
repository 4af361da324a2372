"""pytest plugin of the frontend-suite harness (ours): the CPU dry run (FE_SUITE_DEVICE=cpu).

CPU dry run: torch CUDA calls redirected to the CPU, not a GPU measurement.

On a machine without a GPU, it lets the frontend's tests run with dnngraph standing in for
`cudnn`, to find API and behaviour gaps before a GPU run:

* `cuda.bindings.driver` / `cuda.bindings.runtime` (imported by the frontend's conftest) are
  replaced by stubs that report one device, an sm_90 "NVIDIA H200";
* torch: every `device=` that names CUDA (string, torch.device, int) becomes the CPU, through a
  TorchFunctionMode (factory functions, `*_like`, `new_*`, `Tensor.to`, `Tensor.cuda`);
  `torch.Generator(device="cuda")` is a CPU generator; `torch.cuda.is_available()` is True,
  `get_device_capability()` (9, 0), name/properties of an H200-like sm_90, `current_stream()` a
  stub whose `cuda_stream` is 0, `synchronize` / `empty_cache` no-ops, `manual_seed*` seed the
  CPU generator (the redirected tensors draw from it);
* `cudnn.create_handle()` without a device (or with a CUDA one) gives dnngraph's CPU handle
  (`create_handle(device="cpu")`), and a `pygraph` made without a handle gets one such CPU
  handle, so every graph runs on the CPU reference engine.

Per-test timeout: the frontend's conftest arms a faulthandler watchdog (CUDNN_TEST_TIMEOUT)
that ends the pytest-xdist worker; on the controller this plugin turns such a crash, when the
test ran at least that long, into a skip whose message starts with TIMEOUT_MARKER.

Nothing here is part of dnngraph; dnngraph itself fakes no GPU.
"""

import contextlib
import os
import sys
import time
import types

LABEL = "CPU dry run: torch CUDA calls redirected to the CPU, not a GPU measurement"
TIMEOUT_MARKER = "CPU dry run timeout"
DEVICE_NAME = "NVIDIA H200"
CAPABILITY = (9, 0)
TOTAL_MEMORY = 150_754_820_096  # bytes, as an H200 reports (about 140 GiB)
SM_COUNT = 132

_TEST_TIMEOUT_S = float(os.environ.get("CUDNN_TEST_TIMEOUT", "0") or 0)


# --------------------------------------------------------------------------------------------
# cuda.bindings stubs (the frontend's conftest uses cuda-python's runtime and driver)
# --------------------------------------------------------------------------------------------
def _install_cuda_bindings_stubs():
    import enum

    class CUresult(enum.IntEnum):
        CUDA_SUCCESS = 0
        CUDA_ERROR_NOT_INITIALIZED = 3

    driver = types.ModuleType("cuda.bindings.driver")
    driver.__doc__ = "fe_cpu_dryrun stub: " + LABEL
    driver.CUresult = CUresult
    driver.cuCtxGetCurrent = lambda: (CUresult.CUDA_ERROR_NOT_INITIALIZED, None)
    driver.cuGetErrorString = lambda err: (0, b"fe_cpu_dryrun stub (no GPU)")

    runtime = types.ModuleType("cuda.bindings.runtime")
    runtime.__doc__ = "fe_cpu_dryrun stub: " + LABEL
    runtime.cudaStreamNonBlocking = 1
    runtime.cudaGetDeviceCount = lambda: (0, 1)
    runtime.cudaGetErrorString = lambda err: (0, b"fe_cpu_dryrun stub (no GPU)")
    runtime.cudaGetDeviceProperties = lambda device: (
        0,
        types.SimpleNamespace(name=(DEVICE_NAME + " (CPU dry run)").encode(), major=CAPABILITY[0], minor=CAPABILITY[1],
                              multiProcessorCount=SM_COUNT, totalGlobalMem=TOTAL_MEMORY),
    )
    runtime.cudaStreamCreateWithFlags = lambda flags: (0, 0)
    runtime.cudaStreamCreate = lambda: (0, 0)
    runtime.cudaStreamDestroy = lambda stream: (0,)
    runtime.cudaMemGetInfo = lambda: (0, TOTAL_MEMORY, TOTAL_MEMORY)
    runtime.cudaDeviceSynchronize = lambda: (0,)
    runtime.cudaGetDevice = lambda: (0, 0)
    runtime.cudaSetDevice = lambda device: (0,)

    cuda = sys.modules.get("cuda") or types.ModuleType("cuda")
    if not hasattr(cuda, "__path__"):
        cuda.__path__ = []
    bindings = types.ModuleType("cuda.bindings")
    bindings.__path__ = []
    bindings.driver, bindings.runtime = driver, runtime
    cuda.bindings = bindings
    sys.modules.update({"cuda": cuda, "cuda.bindings": bindings,
                        "cuda.bindings.driver": driver, "cuda.bindings.runtime": runtime})


# --------------------------------------------------------------------------------------------
# torch
# --------------------------------------------------------------------------------------------
def _is_cuda_device(dev):
    import torch

    if isinstance(dev, str):
        return dev.startswith("cuda")
    if isinstance(dev, torch.device):
        return dev.type == "cuda"
    return isinstance(dev, int) and not isinstance(dev, bool)


def _patch_torch():
    import torch
    from torch.overrides import TorchFunctionMode

    cpu = torch.device("cpu")

    class _Stream:
        """Stands for a CUDA stream: the default stream (handle 0)."""

        cuda_stream = 0
        device = cpu
        priority = 0

        def __init__(self, *args, **kwargs):
            pass

        def synchronize(self):
            pass

        def wait_stream(self, other):
            pass

        def wait_event(self, event):
            pass

        def record_event(self, event=None):
            return event or _Event()

        def query(self):
            return True

        def __eq__(self, other):
            return isinstance(other, _Stream)

        def __hash__(self):
            return 0

    class _Event:
        def __init__(self, *args, **kwargs):
            self._t = None

        def record(self, stream=None):
            self._t = time.perf_counter()

        def synchronize(self):
            pass

        def wait(self, stream=None):
            pass

        def query(self):
            return True

        def elapsed_time(self, end):
            if self._t is None or end._t is None:
                return 0.0
            return (end._t - self._t) * 1000.0

    default_stream = _Stream()
    props = types.SimpleNamespace(
        name=DEVICE_NAME, major=CAPABILITY[0], minor=CAPABILITY[1], multi_processor_count=SM_COUNT,
        total_memory=TOTAL_MEMORY, L2_cache_size=50 * 1024 * 1024, warp_size=32, is_integrated=False,
        is_multi_gpu_board=False, max_threads_per_multi_processor=2048, regs_per_multiprocessor=65536,
        gcnArchName="NVIDIA H200", uuid="00000000-0000-0000-0000-000000000000",
    )

    tc = torch.cuda
    patches = {
        "is_available": lambda: True,
        "device_count": lambda: 1,
        "current_device": lambda: 0,
        "set_device": lambda device: None,
        "is_initialized": lambda: True,
        "_lazy_init": lambda: None,
        "init": lambda: None,
        "get_device_capability": lambda device=None: CAPABILITY,
        "get_device_name": lambda device=None: DEVICE_NAME,
        "get_device_properties": lambda device=None: props,
        "get_arch_list": lambda: ["sm_90"],
        "is_bf16_supported": lambda *a, **k: True,
        "synchronize": lambda device=None: None,
        "empty_cache": lambda: None,
        "ipc_collect": lambda: None,
        "manual_seed": lambda seed: torch.default_generator.manual_seed(int(seed)) and None,
        "manual_seed_all": lambda seed: torch.default_generator.manual_seed(int(seed)) and None,
        "seed": lambda: torch.default_generator.seed() and None,
        "seed_all": lambda: torch.default_generator.seed() and None,
        "initial_seed": lambda: torch.initial_seed(),
        "get_rng_state": lambda device="cuda": torch.get_rng_state(),
        "set_rng_state": lambda state, device="cuda": torch.set_rng_state(state),
        "current_stream": lambda device=None: default_stream,
        "default_stream": lambda device=None: default_stream,
        "set_stream": lambda stream: None,
        "stream": lambda stream=None: contextlib.nullcontext(stream),
        "device": lambda device=None: contextlib.nullcontext(),
        "Stream": _Stream,
        "Event": _Event,
        "mem_get_info": lambda device=None: (TOTAL_MEMORY, TOTAL_MEMORY),
        "memory_allocated": lambda device=None: 0,
        "max_memory_allocated": lambda device=None: 0,
        "memory_reserved": lambda device=None: 0,
        "max_memory_reserved": lambda device=None: 0,
        "reset_peak_memory_stats": lambda device=None: None,
        "reset_max_memory_allocated": lambda device=None: None,
    }
    for name, value in patches.items():
        setattr(tc, name, value)
    torch.cuda.random.manual_seed = patches["manual_seed"]
    torch.cuda.random.manual_seed_all = patches["manual_seed_all"]

    base_generator = torch._C.Generator

    class Generator(base_generator):
        """torch.Generator whose device is always the CPU (the tensors it feeds are CPU ones)."""

        def __new__(cls, device=None):
            return super().__new__(cls, "cpu")

        def __init__(self, device=None):
            pass

    Generator.__name__ = Generator.__qualname__ = "Generator"
    torch.Generator = Generator

    tensor_cuda, tensor_to = torch.Tensor.cuda, torch.Tensor.to
    tensor_pin, tensor_record = torch.Tensor.pin_memory, torch.Tensor.record_stream

    # torch.amp.autocast("cuda", dtype=D): the CPU tensors are outside CUDA autocast, so emulate
    # its cast-to-D of the matmul/conv family here (the ops CUDA autocast runs in its dtype).
    autocast_stack = []
    real_autocast = torch.amp.autocast

    class _CudaAutocast:
        def __init__(self, dtype=None, enabled=True):
            self.dtype = dtype if dtype is not None else torch.float16
            self.enabled = enabled

        def __enter__(self):
            autocast_stack.append(self.dtype if self.enabled else None)
            return self

        def __exit__(self, *exc):
            autocast_stack.pop()
            return False

    def autocast(device_type, dtype=None, enabled=True, cache_enabled=None):
        if str(device_type).startswith("cuda"):
            return _CudaAutocast(dtype, enabled)
        return real_autocast(device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)

    torch.amp.autocast = autocast
    torch.autocast = autocast
    torch.cuda.amp.autocast = lambda enabled=True, dtype=torch.float16, cache_enabled=True: _CudaAutocast(dtype, enabled)
    autocast_ops = {"conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                    "conv_transpose3d", "matmul", "__matmul__", "mm", "bmm", "addmm", "addbmm",
                    "baddbmm", "linear", "einsum", "chain_matmul", "prelu"}

    def _cast(x, dtype):
        if isinstance(x, torch.Tensor) and x.is_floating_point() and x.dtype != dtype:
            return x.to(dtype)
        if isinstance(x, (list, tuple)):
            return type(x)(_cast(y, dtype) for y in x)
        return x

    conv_names = {"conv1d", "conv2d", "conv3d", "convolution", "_convolution"}
    bn_arg_count = 5  # input, weight, bias, running_mean, running_var (torch.batch_norm's order)

    class _RedirectCudaToCpu(TorchFunctionMode):
        def __torch_function__(self, func, types_, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            name = getattr(func, "__name__", "")
            if name in conv_names and args and isinstance(args[0], torch.Tensor) \
                    and args[0].dtype == torch.int8:
                # CUDA torch has no int8 convolution (CPU torch has one): raise as on the GPU.
                raise RuntimeError(f"fe_cpu_dryrun: '{name}' not implemented for 'Char' on CUDA "
                                   f"(CPU torch has it; the dry run refuses it as the GPU does)")
            if name == "batch_norm":
                # CUDA accepts weight/bias/running stats of any shape with C elements (e.g.
                # (1, C, 1, 1)); CPU wants 1-D: flatten them (views, so running stats update).
                def flat(t):
                    if isinstance(t, torch.Tensor) and t.dim() > 1 and t.is_contiguous():
                        return t.view(-1)
                    return t

                args = (args[0],) + tuple(flat(a) for a in args[1:bn_arg_count]) + tuple(args[bn_arg_count:])
                kwargs = {k: (flat(v) if k in ("weight", "bias", "running_mean", "running_var") else v)
                          for k, v in kwargs.items()}
            if autocast_stack and autocast_stack[-1] is not None and name in autocast_ops:
                dtype = autocast_stack[-1]
                args = _cast(args, dtype)
                kwargs = {k: _cast(v, dtype) for k, v in kwargs.items()}
            if func is tensor_cuda:
                mf = kwargs.get("memory_format")
                return args[0] if mf is None else args[0].contiguous(memory_format=mf)
            if func is tensor_pin:
                return args[0]
            if func is tensor_record:
                return None
            if "device" in kwargs and _is_cuda_device(kwargs["device"]):
                kwargs["device"] = cpu
            if kwargs.get("pin_memory"):
                kwargs["pin_memory"] = False
            if func is tensor_to and len(args) > 1 and _is_cuda_device(args[1]):
                args = (args[0], cpu) + tuple(args[2:])
            return func(*args, **kwargs)

    # torch.profiler.profile(activities=[CUDA]) needs a GPU: profile the CPU instead.
    import torch.profiler as tp

    class profile(tp.profile):
        def __init__(self, *args, activities=None, **kwargs):
            if activities is not None:
                activities = [a for a in activities if a != tp.ProfilerActivity.CUDA] or [tp.ProfilerActivity.CPU]
            super().__init__(*args, activities=activities, **kwargs)

    tp.profile = profile

    mode = _RedirectCudaToCpu()
    mode.__enter__()  # for the whole process: pushed once, never popped
    return mode


def _patch_dnngraph():
    import dnngraph

    real_create_handle = dnngraph.create_handle
    if getattr(real_create_handle, "_fe_cpu_dryrun", False):
        return

    def create_handle(*args, **kwargs):
        if args:
            device, args = args[0], args[1:]
        else:
            device = kwargs.pop("device", None)
        if device is None or str(device).startswith("cuda"):
            device = "cpu"
        return real_create_handle(*args, device=device, **kwargs)

    create_handle._fe_cpu_dryrun = True
    create_handle.__doc__ = "fe_cpu_dryrun: dnngraph's CPU handle (" + LABEL + ")"
    dnngraph.create_handle = create_handle

    # A pygraph made without a handle takes dnngraph's default handle, a CUDA one: give it a CPU
    # handle instead (one for the process, as the frontend's default handle is).
    default_handle = []
    real_init = dnngraph.pygraph.__init__

    def pygraph_init(self, *args, **kwargs):
        first_is_handle = bool(args) and isinstance(args[0], dnngraph.Handle)
        if (not first_is_handle and kwargs.get("handle") is None and len(args) < 5
                and kwargs.get("device_property") is None):
            if not default_handle:
                default_handle.append(real_create_handle(device="cpu"))
            kwargs["handle"] = default_handle[0]
        real_init(self, *args, **kwargs)

    dnngraph.pygraph.__init__ = pygraph_init


_install_cuda_bindings_stubs()
_MODE = _patch_torch()
_patch_dnngraph()


# --------------------------------------------------------------------------------------------
# pytest hooks
# --------------------------------------------------------------------------------------------
_started = {}


def pytest_report_header(config):
    return [f"*** {LABEL} ***",
            f"*** per-test timeout {_TEST_TIMEOUT_S:g} s (CUDNN_TEST_TIMEOUT): a test cut by it is "
            f"reported as skipped, '{TIMEOUT_MARKER}' ***"]


def pytest_sessionstart(session):
    try:
        from _pytest.junitxml import xml_key

        xml = session.config.stash.get(xml_key, None)
        if xml is not None:
            xml.add_global_property("fe_suite_mode", LABEL)
    except Exception:
        pass


def pytest_runtest_logstart(nodeid, location):
    _started[nodeid] = time.monotonic()


def pytest_handlecrashitem(crashitem, report, sched):
    """xdist controller: a worker died in `crashitem`; a timeout when it ran that long."""
    start = _started.get(crashitem)
    if start is None or _TEST_TIMEOUT_S <= 0:
        return
    ran = time.monotonic() - start
    if ran < 0.9 * _TEST_TIMEOUT_S:
        return  # a real crash: reported as the failure it is
    path, lineno = report.location[0], (report.location[1] or 0)
    report.outcome = "skipped"
    report.when = "call"
    report.longrepr = (path, lineno, f"Skipped: {TIMEOUT_MARKER}: no result after {ran:.0f} s "
                                     f"(CUDNN_TEST_TIMEOUT={_TEST_TIMEOUT_S:g}); {LABEL}")


def pytest_terminal_summary(terminalreporter):
    terminalreporter.write_sep("=", LABEL)
