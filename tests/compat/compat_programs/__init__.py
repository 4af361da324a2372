"""Frontend-style programs: each module's run(h) uses h.cudnn as the frontend's `cudnn`."""

NAMES = [
    "matmul_bias_relu",
    "conv_fprop_nhwc",
    "conv_dgrad_wgrad",
    "layernorm_train",
    "rmsnorm_train",
    "batchnorm_train",
    "pointwise_forms",
    "reduction_sum",
    "sdpa_fwd",
    "sdpa_bwd",
    "wrapper_graph",
    "jit_graph_cache",
    "serialize_roundtrip",
    "execute_forms",
    "not_supported_error",
    "torch_dtypes",
]
