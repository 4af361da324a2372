"""The CPU smoke runs of the torch benchmarks: bench/torch/blocks.py (every block at tiny sizes,
checked against eager in fp64, outputs and every gradient, for our modules and torch.compile of
them, then timed), residual_order.py and linear_epilogue.py; and the profiles' kernel classes."""

import os
import subprocess
import sys

from torch_util import torch  # noqa: F401  (skips without torch / dnngraph.torch)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def run_bench(script, *args, timeout=600):
    """stdout of bench/torch/<script> with args, which must exit 0."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "torch", script), *args],
                       capture_output=True, text=True, env=env, timeout=timeout)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    return r.stdout


def test_blocks_bench_cpu_smoke():
    out = run_bench("blocks.py", "--cpu-smoke", "--strict", timeout=900)
    for name in ("gpt_d1024", "gpt_d768", "llama_d2048", "resnet_c64", "resnet_c256"):
        assert f"| {name} |" in out, out
        assert f"{name}:" in out
    assert out.count(" ok") == 10, out  # dnngraph and compile(ours) vs eager, per block
    assert "MISMATCH" not in out and "fallback warning" not in out


def test_blocks_bench_stacked_layers_cpu_smoke():
    """--depth: layers in sequence, each with its own weights, still as close to fp64 as eager."""
    out = run_bench("blocks.py", "--cpu-smoke", "--strict", "--depth", "2",
                    "--blocks", "gpt_d768,resnet_c256", "--no-compile")
    assert out.count(" ok") == 2 and "2 layer(s) per block" in out, out


def test_residual_order_bench_cpu_smoke():
    """bench/torch/residual_order.py: both orders of bias and residual add, each as written,
    equal to fp64 eager."""
    out = run_bench("residual_order.py", "--cpu-smoke")
    assert out.count(" ok") == 4 and "MISMATCH" not in out, out


def test_kernel_classes():
    """The profiles' GPU time by class: a name decides it, and a Triton kernel named after the
    convolution whose bias gradient it computes is not a convolution."""
    sys.path.insert(0, os.path.join(ROOT, "bench", "torch"))
    from _timing import kernel_class

    cases = {
        "sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc": "matmul/conv",
        "sm90_xmma_wgrad_implicit_gemm_indexed_bf16bf16_bf16f32_f32": "matmul/conv",
        "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_TNN": "matmul/conv",
        "void cudnn::engines_precompiled::splitKreduce_kernel<float, float>": "matmul/conv",
        "cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_7": "attention",
        "triton_red_fused_convolution_backward_0": "other",
        "triton_poi_fused__scaled_dot_product_attention_0": "other",
        "void at::native::vectorized_elementwise_kernel<4, at::native::threshold_kernel": "other",
        "Memcpy DtoD (Device -> Device)": "other",
        "cudnn_generated_fort_native_sm90_matMul_pointwise_knob_23_128x128x32": "matmul/conv",
        "cudnn_generated_pointwise_pointwise_pointwise_pointwise_cutlass_sm80": "other",
        "void cudnn::fusion::compute_dot_do_o_specialized<true, 128>(void const*)": "attention",
        "void cublasLt::epilogue::impl::globalKernelBgradAB_v2<8, 128, __nv_bfloat16>": "other",
    }
    assert {n: kernel_class(n) for n in cases} == cases


def test_linear_epilogue_bench_cpu_smoke():
    """bench/torch/linear_epilogue.py: every form of each forward GEMM equal to fp64 eager."""
    out = run_bench("linear_epilogue.py", "--cpu-smoke")
    assert out.count(" ok") == 11 and "MISMATCH" not in out, out
