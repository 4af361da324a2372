"""torch.compile(backend="dnngraph") on blocks written with stock torch.nn modules: eager, against
torch.compile (Inductor) and torch.compile(backend="dnngraph") in one process, both in the
default mode or both in the one --mode names.
Outputs and every gradient are checked against eager before anything is timed; the first
compiled call of each (compile time) is measured apart: on a GPU in a fresh process per compiler
and block, with empty on-disk caches (--warm-caches keeps the machine's), after a small warm-up
compile, so that neither compiler reuses what the other built.

  training blocks (bf16, mean ms of fwd+bwd of mean(block(x)^2) over back-to-back steps):
    gpt_d1024    GPT block d1024 h16 ff4096 (LayerNorm, Linear, SDPA causal, GELU tanh), b8 s1024
    gpt_d768     GPT block d768 h12 ff3072, b16 s512
    llama        Llama-style block d2048, GQA 32/8 heads of 128, RoPE, RMSNorm, SwiGLU ff5632,
                 b4 s2048
    resnet_c64   ResNet basic block c64 56x56 (Conv2d, ReLU, residual add), b32, channels_last
    resnet_c256  ResNet basic block c256 14x14, b64, channels_last
  inference (torch.no_grad, mean ms of the forward over back-to-back calls):
    resnet50     ResNet-50 (torchvision's when installed, else the same bottleneck network
                 written here), random weights, eval mode, bf16, channels_last, b64 224x224

    python bench/torch/compile_backend.py [--blocks gpt_d1024,resnet50] [--iters 20]
        [--mode reduce-overhead]
    python bench/torch/compile_backend.py --cpu-smoke   # tiny sizes on the CPU (a test runs it)
"""

import argparse
import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import time

# Compile times are first-compile times: unless --warm-caches, this process starts with empty
# on-disk caches for both compilers (Inductor's FX graphs and Triton kernels, dnngraph's plans),
# set before torch is imported; a warm machine would otherwise serve one side from disk.
if "--warm-caches" not in sys.argv:
    _caches = tempfile.mkdtemp(prefix="compile-backend-caches-")
    atexit.register(shutil.rmtree, _caches, ignore_errors=True)
    for _var, _sub in (("TORCHINDUCTOR_CACHE_DIR", "inductor"), ("TRITON_CACHE_DIR", "triton"),
                       ("DNNGRAPH_CACHE_DIR", "dnngraph")):
        os.environ[_var] = os.path.join(_caches, _sub)

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # _timing (PYTHONSAFEPATH too)
import torch_blocks  # noqa: E402  (TorchLlamaBlock, BasicBlock(ours=False): stock modules)
from _timing import describe_classes, gpu_time_by_class, time_in_turn  # noqa: E402

import dnngraph.torch  # noqa: E402  (registers the backend)
from dnngraph.torch.compile import make_backend  # noqa: E402
from dnngraph.torch.compile._backend import collect_reports  # noqa: E402


GPTBlock = torch_blocks.TorchGPTBlock  # stock modules, as people write it


class Bottleneck(nn.Module):
    def __init__(self, cin, width, stride, down):
        super().__init__()
        cout = width * 4
        self.conv1, self.bn1 = nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3, self.bn3 = nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout)
        self.down = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False),
                                   nn.BatchNorm2d(cout)) if down else None)

    def forward(self, x):
        h = F.relu(self.bn1(self.conv1(x)))
        h = F.relu(self.bn2(self.conv2(h)))
        h = self.bn3(self.conv3(h))
        return F.relu(h + (self.down(x) if self.down is not None else x))


def resnet50(width=64, layers=(3, 4, 6, 3), classes=1000):
    """torchvision's resnet50 when installed; else the same network (bottlenecks 3-4-6-3)."""
    try:
        import torchvision

        if width == 64 and tuple(layers) == (3, 4, 6, 3):
            return torchvision.models.resnet50()
    except ImportError:
        pass
    mods = [nn.Conv2d(3, width, 7, stride=2, padding=3, bias=False), nn.BatchNorm2d(width),
            nn.ReLU(), nn.MaxPool2d(3, stride=2, padding=1)]
    cin = width
    for i, n in enumerate(layers):
        w = width * 2**i
        for j in range(n):
            mods.append(Bottleneck(cin, w, 2 if (j == 0 and i > 0) else 1, j == 0))
            cin = w * 4
    mods += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes)]
    return nn.Sequential(*mods)


BLOCKS = {
    "gpt_d1024": (lambda: GPTBlock(1024, 16, 4096), (8, 1024, 1024), True),
    "gpt_d768": (lambda: GPTBlock(768, 12, 3072), (16, 512, 768), True),
    "llama": (lambda: torch_blocks.TorchLlamaBlock(2048, 32, 8, 5632, max_seq_len=2048,
                                                   head_dim=128), (4, 2048, 2048), True),
    "resnet_c64": (lambda: torch_blocks.BasicBlock(64, ours=False), (32, 64, 56, 56), True),
    "resnet_c256": (lambda: torch_blocks.BasicBlock(256, ours=False), (64, 256, 14, 14), True),
    "resnet50": (resnet50, (64, 3, 224, 224), False),
}
SMOKE = {
    "gpt_d1024": (lambda: GPTBlock(32, 2, 64), (2, 8, 32), True),
    "gpt_d768": (lambda: GPTBlock(24, 3, 48), (2, 6, 24), True),
    "llama": (lambda: torch_blocks.TorchLlamaBlock(32, 4, 2, 48, max_seq_len=16, head_dim=8),
              (2, 8, 32), True),
    "resnet_c64": (lambda: torch_blocks.BasicBlock(8, ours=False), (2, 8, 6, 6), True),
    "resnet_c256": (lambda: torch_blocks.BasicBlock(16, ours=False), (2, 16, 4, 4), True),
    "resnet50": (lambda: resnet50(width=4, layers=(1, 1, 1, 1), classes=10), (2, 3, 32, 32),
                 False),
}


def make_input(shape, device, dtype):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(*shape, generator=g).to(device, dtype)
    return x.contiguous(memory_format=torch.channels_last) if x.dim() == 4 else x


def step(model, x, train):
    """Training: forward + backward, returns (output, grad of x, parameter grads). Inference:
    the forward under no_grad."""
    if not train:
        with torch.no_grad():
            return model(x), None, {}
    model.zero_grad(set_to_none=True)
    xg = x.detach().requires_grad_()
    out = model(xg)
    out.float().square().mean().backward()
    grads = {n.replace("_orig_mod.", ""): p.grad for n, p in model.named_parameters()}
    return out, xg.grad, grads


def rel_err(a, b):
    a, b = a.float(), b.float()
    return ((a - b).norm() / b.norm().clamp_min(1e-12)).item()


def check(name, model, ref, x, train, tol):
    out, gx, grads = step(model, x, train)
    out_r, gx_r, grads_r = step(ref, x, train)
    errs = {"out": rel_err(out, out_r)}
    if train:
        errs["dx"] = rel_err(gx, gx_r)
        for n, g in grads_r.items():
            errs["d" + n] = rel_err(grads[n], g)
    worst = max(errs, key=errs.get)
    ok = errs[worst] <= tol
    print(f"  check {name}: worst rel. error {errs[worst]:.2e} ({worst}) "
          f"{'ok' if ok else 'MISMATCH'}")
    return ok


def time_ms(variants, x, train, iters, rounds=3):
    """Mean ms of a step over `iters` back-to-back steps for each variant, the best of `rounds`
    rounds taken in turn (_timing.time_in_turn)."""
    return time_in_turn(variants, lambda model: step(model, x, train), iters, rounds)


def warm_up(device, dtype, backends):
    """One small compiled training step with each compiler before any row: what a process pays
    once (the compilers' imports, Inductor's worker pool, cuDNN and cuBLAS handles) is not
    charged to the first row's compile time of whichever compiler runs first."""
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(64, 64), nn.GELU(), nn.LayerNorm(64)).to(device, dtype)
    x = torch.randn(8, 64, device=device, dtype=dtype)
    for b in backends:
        torch._dynamo.reset()
        step(torch.compile(m, backend=b), x, True)
    torch._dynamo.reset()


def isolated_first_call_s(name, variant, args):
    """first_call_s of one variant of one block in a fresh process of this script (empty
    on-disk caches unless --warm-caches, its own warm-up): nothing the other compiler built in
    this process (Triton kernels, Inductor's code caches) is reused."""
    cmd = [sys.executable, os.path.abspath(__file__), "--first-call", variant, "--blocks", name]
    for flag in ("cpu_smoke", "warm_caches", "verify", "no_cache_parameter_work", "cudnn_benchmark"):
        if getattr(args, flag):
            cmd.append("--" + flag.replace("_", "-"))
    for opt in ("inner", "mode"):
        if getattr(args, opt):
            cmd += ["--" + opt, getattr(args, opt)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("first-call ")]
    if r.returncode != 0 or not lines:
        raise RuntimeError(f"first call of {variant} in a fresh process failed: "
                           f"{(r.stdout + r.stderr)[-2000:]}")
    for ln in r.stdout.splitlines():
        if ln.startswith("  phases "):
            print(ln, flush=True)
    return float(lines[-1].split()[-1])


def phases_line(reports, total_s):
    """Where the backend's first call went, from its reports (Report.seconds) of every graph
    it compiled: planning and plan builds, measure/verify, the inner compiler, the rest
    (Dynamo, AOTAutograd, the first run)."""
    sums = {k: sum(r.seconds.get(k, 0.0) for r in reports) for k in ("plan", "checks", "inner")}
    return (f"  phases of dnngraph's first call {total_s:.2f} s: planning and plan builds "
            f"{sums['plan']:.2f} s, measure {sums['checks']:.2f} s, inner compiler "
            f"{sums['inner']:.2f} s, the rest (Dynamo, AOTAutograd, the first run) "
            f"{total_s - sum(sums.values()):.2f} s; {len(reports)} graph(s)")


def first_call_s(model, x, train, device):
    """Seconds of the first call (compilation of the forward and backward graphs)."""
    if device != "cpu":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    step(model, x, train)
    if device != "cpu":
        torch.cuda.synchronize()
    return time.perf_counter() - t0


def profile(name, ref, variants, x, train, device):
    """Prints which ops the backend fused and the 15 kernels with the most GPU time over 5 steps
    of Inductor's and the backend's compiled block."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    summary = str(dnngraph.torch.explain(ref, x.detach().requires_grad_(train))).split("\n\n")[0]
    print(f"  {name}: {summary}".replace("\n", "\n    "))
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device != "cpu" else [])
    for v in ("compile", "dnngraph"):
        step(variants[v], x, train)
        with torch_profile(activities=acts) as prof:
            for _ in range(5):
                step(variants[v], x, train)
            if device != "cpu":
                torch.cuda.synchronize()
        key = "self_device_time_total" if device != "cpu" else "self_cpu_time_total"
        print(f"  --- {name} {v}: 5 steps, kernels by GPU time")
        print(prof.key_averages().table(sort_by=key, row_limit=15, max_name_column_width=70))
        if device != "cpu":
            print(describe_classes(f"{name} {v}", gpu_time_by_class(prof, 5)))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--blocks", default=",".join(BLOCKS), help="comma-separated: " + ", ".join(BLOCKS))
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warm-caches", action="store_true", help="keep the machine's on-disk "
                   "compiler caches (default: empty ones, so compile s is a first compile)")
    p.add_argument("--cpu-smoke", action="store_true", help="tiny sizes, fp32, on the CPU")
    p.add_argument("--inner", default=None, help="the dnngraph backend's inner compiler "
                   "(inductor; eager with --cpu-smoke)")
    p.add_argument("--verify", action="store_true", help="the backend's verify option: each "
                   "fused graph checked against ATen at compile time, any that differs left out")
    p.add_argument("--no-cache-parameter-work", action="store_true", help="the backend's "
                   "option cache_parameter_work=False: inference graphs compute their parameter-"
                   "only work (folded batch-norm weights) on every call")
    p.add_argument("--cudnn-benchmark", action="store_true", help="torch.backends.cudnn."
                   "benchmark = True: ATen's convolutions (Inductor's) pick their algorithm by "
                   "timing, and the backend's graphs are autotuned when built (slow first call)")
    p.add_argument("--mode", default=None, choices=["reduce-overhead", "max-autotune"],
                   help="torch.compile's mode, for Inductor and the dnngraph backend alike")
    p.add_argument("--isolate-compile", action=argparse.BooleanOptionalAction, default=None,
                   help="time each compiler's first call in a fresh process of its own (default: "
                   "on a GPU; off with --cpu-smoke)")
    p.add_argument("--first-call", choices=["compile", "dnngraph"], help=argparse.SUPPRESS)
    p.add_argument("--profile", action="store_true", help="after timing, the fused graphs "
                   "(dnngraph.torch.explain) and the top kernels of Inductor and dnngraph by GPU time")
    args = p.parse_args()
    torch.backends.cudnn.benchmark = args.cudnn_benchmark
    smoke = args.cpu_smoke
    if not smoke and not torch.cuda.is_available():
        sys.exit("bench/torch/compile_backend.py: needs a CUDA GPU (or --cpu-smoke)")
    device = "cpu" if smoke else "cuda"
    dtype = torch.float32 if smoke else torch.bfloat16
    tol = 1e-4 if smoke else 2e-2
    iters = 2 if smoke else args.iters
    inner = args.inner or ("eager" if smoke else "inductor")
    default_backend = "aot_eager" if smoke else "inductor"
    table = SMOKE if smoke else BLOCKS
    rounds = 1 if smoke else 3
    isolate = (not smoke) if args.isolate_compile is None else args.isolate_compile
    failures, rows = [], []
    ours = make_backend(inner, mode=args.mode)
    warm_up(device, dtype, {"compile": [default_backend], "dnngraph": [ours]}.get(
        args.first_call, [default_backend, ours]))
    for name in args.blocks.split(","):
        make, shape, train = table[name]
        torch.manual_seed(0)
        ref = make().to(device, dtype)
        if not train:
            ref = ref.eval().to(memory_format=torch.channels_last)
        elif len(shape) == 4:
            ref = ref.to(memory_format=torch.channels_last)
        x = make_input(shape, device, dtype)
        print(f"{name}: {'fwd+bwd' if train else 'inference'} x{tuple(shape)} {dtype} on {device}",
              flush=True)
        torch._dynamo.reset()
        variants = {
            "eager": ref,
            "compile": torch.compile(ref, backend=default_backend, mode=args.mode),
            "dnngraph": torch.compile(ref, backend=make_backend(
                inner, mode=args.mode, verify=args.verify,
                cache_parameter_work=not args.no_cache_parameter_work)),
        }
        if args.first_call:  # a fresh process of isolated_first_call_s
            with collect_reports() as reports:
                s = first_call_s(variants[args.first_call], x, train, device)
            if args.first_call == "dnngraph":
                print(phases_line(reports, s))
            print(f"first-call {args.first_call} {s:.3f}")
            continue
        try:
            if isolate:
                compile_s = {v: isolated_first_call_s(name, v, args) for v in ("dnngraph", "compile")}
                for v in ("dnngraph", "compile"):  # compiled here too, for the timing
                    step(variants[v], x, train)
            else:
                # dnngraph compiles first: kernels its inner Inductor shares with Inductor's
                # own compile are then cached in this process for Inductor, not for dnngraph.
                compile_s = {}
                for v in ("dnngraph", "compile"):
                    with collect_reports() as reports:
                        compile_s[v] = first_call_s(variants[v], x, train, device)
                    if v == "dnngraph":
                        print(phases_line(reports, compile_s[v]), flush=True)
            if not check("dnngraph vs eager", variants["dnngraph"], ref, x, train, tol):
                failures.append(f"{name}: dnngraph differs from eager")
            ms = time_ms(variants, x, train, iters, rounds)
        except Exception as e:  # one block's failure must not hide the others' rows
            failures.append(f"{name}: {type(e).__name__}: {str(e)[:300]}")
            print(f"  FAILED: {type(e).__name__}: {e}", flush=True)
            continue
        rows.append((name, ms, compile_s))
        if args.profile:
            profile(name, ref, variants, x, train, device)
        print("  " + ", ".join(f"{v} {t:.3f} ms" for v, t in ms.items())
              + ", first call " + ", ".join(f"{v} {t:.1f} s" for v, t in compile_s.items()), flush=True)
    if args.first_call:
        return
    print()
    print("| block | eager | compile | dnngraph | compile/dnngraph | compile s | dnngraph s "
          "| compile time ratio |")
    print("| --- " * 8 + "|")
    for name, ms, cs in rows:
        print(f"| {name} | {ms['eager']:.3f} | {ms['compile']:.3f} | {ms['dnngraph']:.3f} "
              f"| {ms['compile'] / ms['dnngraph']:.2f}x | {cs['compile']:.2f} | {cs['dnngraph']:.2f} "
              f"| {cs['dnngraph'] / max(cs['compile'], 1e-9):.2f} |")
    where = "each in a fresh process" if isolate else "dnngraph's first"
    caches = "the machine's" if args.warm_caches else "empty"
    print(f"(mean ms over {iters} back-to-back steps, best of {rounds} round(s) taken in turn, {dtype}, "
          f"{device}, mode {args.mode or 'default'}"
          f"{', torch.backends.cudnn.benchmark on' if args.cudnn_benchmark else ''}; "
          f"compile = torch.compile backend "
          f"{default_backend}, dnngraph = backend 'dnngraph' with inner {inner}; compile s = "
          f"first call, {where}, {caches} on-disk caches)")
    if failures:
        print("FAILED: " + "; ".join(failures))
        sys.exit(1)


if __name__ == "__main__":
    main()
