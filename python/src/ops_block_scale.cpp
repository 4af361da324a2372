// block_scale_quantize / block_scale_dequantize: the cuDNN frontend's methods and keywords.
#include "common.hpp"

namespace dnngraph::py {

void bind_op_block_scale_quantize(nb::class_<PyGraph>& cls) {
  cls.def(
      "block_scale_quantize",
      [](PyGraph& g, ir::Tensor input, int64_t block_size, std::optional<int64_t> axis,
         bool transpose, DataType compute, std::string name) {
        ir::BlockScaleQuantizeAttrs a;
        a.block_size = block_size;
        a.axis = axis;
        a.transpose = transpose;
        auto [y, scale] =
            g.graph.block_scale_quantize(input, a, op_options(compute, std::move(name)));
        nb::list out;  // a list, as the frontend returns its multi-output ops
        out.append(y);
        out.append(scale);
        return out;
      },
      nb::arg("input"), nb::arg("block_size"), nb::arg("axis") = nb::none(),
      nb::arg("transpose") = false, nb::arg("compute_data_type") = DataType::NotSet,
      nb::arg("name") = "",
      "[Y, scale]: blocks of block_size elements along axis (default the last dim) share one "
      "scale: FP8_E8M0 2^(floor(log2(amax)) - emax) (OCP MX, the default), or, with the scale's "
      "data type set to FP8_E4M3 and Y FP4_E2M1 (NVFP4), amax / 6 rounded up to E4M3; Y = input "
      "/ scale, saturated. Set Y's data type (FP8_E4M3, FP8_E5M2 or FP4_E2M1). transpose=True "
      "makes Y and scale packed with the axis innermost.");
  frontend_form(cls, "block_scale_quantize",
                {"input", "group_offset", "block_size", "axis", "transpose"});
}

void bind_op_block_scale_dequantize(nb::class_<PyGraph>& cls) {
  cls.def(
      "block_scale_dequantize",
      [](PyGraph& g, ir::Tensor input, ir::Tensor descale, std::vector<int64_t> block_size,
         bool is_negative_scale, DataType compute, std::string name) {
        ir::BlockScaleDequantizeAttrs a;
        a.block_size = std::move(block_size);
        a.negative_scale = is_negative_scale;
        return g.graph.block_scale_dequantize(input, descale, a,
                                              op_options(compute, std::move(name)));
      },
      nb::arg("input"), nb::arg("descale"), nb::arg("block_size"),
      nb::arg("is_negative_scale") = false, nb::arg("compute_data_type") = DataType::NotSet,
      nb::arg("name") = "",
      "input * descale, one scale per block: block_size holds one entry per trailing dim of "
      "input (e.g. [1, 32]), and descale's dims times the blocks are input's.");
  frontend_form(cls, "block_scale_dequantize",
                {"input", "descale", "block_size", "is_negative_scale"});
}

}  // namespace dnngraph::py
