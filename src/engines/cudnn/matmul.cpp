// Matmul -> MATMUL descriptor + OPERATION_MATMUL. cuDNN wants rank >= 3 ([batch..., M, K]); the
// canonical views already carry leading 1s for 2-D operands.
#include "engines/cudnn/lowering.hpp"

namespace dnngraph::cudnn {

Status add_matmul(LowerContext& cx, const std::string& what, cudnnDataType_t comp,
                  cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b,
                  cudnnBackendDescriptor_t c, cudnnBackendDescriptor_t m_override,
                  cudnnBackendDescriptor_t n_override, cudnnBackendDescriptor_t k_override) {
  DNNGRAPH_ASSIGN_OR_RETURN(
      auto md, Descriptor::create(CUDNN_BACKEND_MATMUL_DESCRIPTOR, what + " (matmul desc)"));
  DNNGRAPH_TRY(md.set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, comp));
  DNNGRAPH_TRY(md.finalize(ErrorCode::NotSupported));
  DNNGRAPH_ASSIGN_OR_RETURN(auto od,
                            Descriptor::create(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, what));
  DNNGRAPH_TRY(od.set(CUDNN_ATTR_OPERATION_MATMUL_ADESC, a));
  DNNGRAPH_TRY(od.set(CUDNN_ATTR_OPERATION_MATMUL_BDESC, b));
  DNNGRAPH_TRY(od.set(CUDNN_ATTR_OPERATION_MATMUL_CDESC, c));
  DNNGRAPH_TRY(od.set(CUDNN_ATTR_OPERATION_MATMUL_DESC, md));
  if (m_override)
    DNNGRAPH_TRY(od.set(CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC, m_override));
  if (n_override)
    DNNGRAPH_TRY(od.set(CUDNN_ATTR_OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC, n_override));
  if (k_override)
    DNNGRAPH_TRY(od.set(CUDNN_ATTR_OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC, k_override));
  cx.keep(std::move(md));
  return cx.add_op(std::move(od));
}

Status lower_matmul(LowerContext& cx, const ir::Node& n) {
  const std::string what = detail::cat("matmul '", n.name, "'");
  const ir::Tensor a = n.input(Role::A), b = n.input(Role::B), c = n.output(Role::C);
  if (n.as<ir::MatmulAttrs>().padding_value)
    return make_error(ErrorCode::NotSupported, what, ": padding_value is not supported");
  DNNGRAPH_ASSIGN_OR_RETURN(auto ta, cx.tensor(a));
  DNNGRAPH_ASSIGN_OR_RETURN(auto tb, cx.tensor(b));
  DNNGRAPH_ASSIGN_OR_RETURN(auto tc, cx.tensor(c));
  return add_matmul(cx, what, to_cudnn(cx.compute_type(n)), ta, tb, tc);
}

}  // namespace dnngraph::cudnn
