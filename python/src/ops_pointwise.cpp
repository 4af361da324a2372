// Pointwise ops: one method per mode, plus bias/scale and the generic pointwise(mode, ...).
// Tensor inputs also accept Python numbers, which become pass-by-value constants.
#include "common.hpp"

namespace dnngraph::py {

namespace {

using Opt = std::optional<double>;

ir::PointwiseAttrs pw(PointwiseMode mode) {
  ir::PointwiseAttrs a;
  a.mode = mode;
  return a;
}
using In = std::optional<TensorOrScalar>;

ir::Tensor add_pointwise(PyGraph& g, ir::PointwiseAttrs a, const In& x0, const In& x1, const In& x2,
                         DataType compute, std::string name) {
  return g.graph.pointwise(as_tensor(g, x0), as_tensor(g, x1), as_tensor(g, x2), a,
                           op_options(compute, std::move(name)));
}

struct Named {
  const char* method;
  PointwiseMode mode;
};

// Modes whose only attributes are the common ones.
constexpr Named kUnary[] = {
    {"abs", PointwiseMode::Abs},
    {"neg", PointwiseMode::Neg},
    {"exp", PointwiseMode::Exp},
    {"log", PointwiseMode::Log},
    {"sqrt", PointwiseMode::Sqrt},
    {"rsqrt", PointwiseMode::Rsqrt},
    {"reciprocal", PointwiseMode::Reciprocal},
    {"tanh", PointwiseMode::Tanh},
    {"sigmoid", PointwiseMode::Sigmoid},
    {"gelu", PointwiseMode::Gelu},
    {"gelu_approx_tanh", PointwiseMode::GeluApproxTanh},
    {"erf", PointwiseMode::Erf},
    {"sin", PointwiseMode::Sin},
    {"cos", PointwiseMode::Cos},
    {"floor", PointwiseMode::Floor},
    {"ceil", PointwiseMode::Ceil},
    {"identity", PointwiseMode::Identity},
    {"logical_not", PointwiseMode::LogicalNot},
    {"tan", PointwiseMode::Tan},
};
constexpr Named kBinary[] = {
    {"add", PointwiseMode::Add},
    {"sub", PointwiseMode::Sub},
    {"mul", PointwiseMode::Mul},
    {"div", PointwiseMode::Div},
    {"max", PointwiseMode::Max},
    {"min", PointwiseMode::Min},
    {"maximum", PointwiseMode::Max},
    {"minimum", PointwiseMode::Min},
    {"pow", PointwiseMode::Pow},
    {"cmp_eq", PointwiseMode::CmpEq},
    {"cmp_neq", PointwiseMode::CmpNeq},
    {"cmp_gt", PointwiseMode::CmpGt},
    {"cmp_ge", PointwiseMode::CmpGe},
    {"cmp_lt", PointwiseMode::CmpLt},
    {"cmp_le", PointwiseMode::CmpLe},
    {"logical_and", PointwiseMode::LogicalAnd},
    {"logical_or", PointwiseMode::LogicalOr},
    {"add_square", PointwiseMode::AddSquare},
    {"mod", PointwiseMode::Mod},
};
// Backward modes: (loss = dy, input = x) -> dx.
constexpr Named kBackward[] = {
    {"gelu_backward", PointwiseMode::GeluBwd},
    {"gelu_approx_tanh_backward", PointwiseMode::GeluApproxTanhBwd},
    {"sigmoid_backward", PointwiseMode::SigmoidBwd},
    {"tanh_backward", PointwiseMode::TanhBwd},
};

// The frontend's call forms of the pointwise methods (dnngraph._compat).
void frontend_forms(nb::class_<PyGraph>& cls) {
  for (const char* n : {"abs",      "ceil",       "cos",
                        "elu",      "erf",        "exp",
                        "floor",    "gelu",       "gelu_approx_tanh",
                        "identity", "log",        "logical_not",
                        "neg",      "reciprocal", "rsqrt",
                        "sigmoid",  "sin",        "softplus",
                        "sqrt",     "tan",        "tanh"})
    frontend_form(cls, n, {"input"});
  for (const char* n : {"add", "add_square", "div", "logical_and", "logical_or", "mul", "sub"})
    frontend_form(cls, n, {"a", "b"});
  for (const char* n : {"max", "min", "mod", "pow"})
    frontend_form(cls, n, {"input0", "input1"}, {{"input0", "a"}, {"input1", "b"}});
  for (const char* n : {"cmp_eq", "cmp_ge", "cmp_gt", "cmp_le", "cmp_lt", "cmp_neq"})
    frontend_form(cls, n, {"input", "comparison"}, {{"input", "a"}, {"comparison", "b"}});
  for (const char* n : {"elu_backward", "gelu_approx_tanh_backward", "gelu_backward",
                        "sigmoid_backward", "softplus_backward", "tanh_backward"})
    frontend_form(cls, n, {"loss", "input"});
  frontend_form(cls, "bias", {"input", "bias"});
  frontend_form(cls, "scale", {"input", "scale"});
  frontend_form(cls, "binary_select", {"input0", "input1", "mask"});
  frontend_form(
      cls, "relu",
      {"input", "negative_slope", "lower_clip", "upper_clip", "name", "compute_data_type"});
  frontend_form(cls, "leaky_relu", "relu",
                {"input", "negative_slope", "name", "compute_data_type"});
  nb::dict relu_bwd;
  relu_bwd["mode"] = PointwiseMode::ReluBwd;
  frontend_form(
      cls, "relu_backward", "pointwise",
      {"loss", "input", "negative_slope", "lower_clip", "upper_clip", "name", "compute_data_type"},
      {{"loss", "input0"}, {"input", "input1"}}, relu_bwd);
  frontend_form(cls, "leaky_relu_backward", "pointwise",
                {"loss", "input", "negative_slope", "name", "compute_data_type"},
                {{"loss", "input0"}, {"input", "input1"}}, relu_bwd);
  frontend_form(cls, "swish", {"input", "swish_beta", "name", "compute_data_type"});
  frontend_form(cls, "swish_backward", "silu_backward",
                {"loss", "input", "swish_beta", "name", "compute_data_type"});
  frontend_form(cls, "gen_index", {"input", "axis", "name", "compute_data_type"});
}

// One method per mode of the tables above (the mode's name).
void def_per_mode(nb::class_<PyGraph>& cls) {
  for (const Named& n : kUnary) {
    const PointwiseMode mode = n.mode;
    cls.def(
        n.method,
        [mode](PyGraph& g, TensorOrScalar input, DataType compute, std::string name) {
          return add_pointwise(g, pw(mode), input, {}, {}, compute, std::move(name));
        },
        nb::arg("input"), nb::arg("compute_data_type") = DataType::NotSet, nb::arg("name") = "");
  }
  for (const Named& n : kBinary) {
    const PointwiseMode mode = n.mode;
    cls.def(
        n.method,
        [mode](PyGraph& g, TensorOrScalar a, TensorOrScalar b, DataType compute, std::string name) {
          return add_pointwise(g, pw(mode), a, b, {}, compute, std::move(name));
        },
        nb::arg("a"), nb::arg("b"), nb::arg("compute_data_type") = DataType::NotSet,
        nb::arg("name") = "");
  }
  for (const Named& n : kBackward) {
    const PointwiseMode mode = n.mode;
    cls.def(
        n.method,
        [mode](PyGraph& g, TensorOrScalar loss, TensorOrScalar input, DataType compute,
               std::string name) {
          return add_pointwise(g, pw(mode), loss, input, {}, compute, std::move(name));
        },
        nb::arg("loss"), nb::arg("input"), nb::arg("compute_data_type") = DataType::NotSet,
        nb::arg("name") = "");
  }
}

// The named forms: bias, scale, binary_select, relu and relu_backward.
void def_named(nb::class_<PyGraph>& cls) {
  cls.def(
      "bias",
      [](PyGraph& g, TensorOrScalar input, TensorOrScalar bias, DataType compute,
         std::string name) {
        return add_pointwise(g, pw(PointwiseMode::Add), input, bias, {}, compute, std::move(name));
      },
      nb::arg("input"), nb::arg("bias"), nb::arg("compute_data_type") = DataType::NotSet,
      nb::arg("name") = "", "input + bias (bias broadcasts).");
  cls.def(
      "scale",
      [](PyGraph& g, TensorOrScalar input, TensorOrScalar scale, DataType compute,
         std::string name) {
        return add_pointwise(g, pw(PointwiseMode::Mul), input, scale, {}, compute, std::move(name));
      },
      nb::arg("input"), nb::arg("scale"), nb::arg("compute_data_type") = DataType::NotSet,
      nb::arg("name") = "", "input * scale (scale broadcasts).");
  cls.def(
      "binary_select",
      [](PyGraph& g, TensorOrScalar input0, TensorOrScalar input1, ir::Tensor mask,
         DataType compute, std::string name) {
        return add_pointwise(g, pw(PointwiseMode::BinarySelect), input0, input1, mask, compute,
                             std::move(name));
      },
      nb::arg("input0"), nb::arg("input1"), nb::arg("mask"),
      nb::arg("compute_data_type") = DataType::NotSet, nb::arg("name") = "",
      "mask ? input0 : input1.");

  cls.def(
      "relu",
      [](PyGraph& g, TensorOrScalar input, Opt negative_slope, Opt lower_clip, Opt upper_clip,
         DataType compute, std::string name) {
        ir::PointwiseAttrs a = pw(PointwiseMode::Relu);
        a.relu_lower_clip_slope = negative_slope;
        a.relu_lower_clip = lower_clip;
        a.relu_upper_clip = upper_clip;
        return add_pointwise(g, a, input, {}, {}, compute, std::move(name));
      },
      nb::arg("input"), nb::arg("negative_slope").none() = nb::none(),
      nb::arg("lower_clip").none() = nb::none(), nb::arg("upper_clip").none() = nb::none(),
      nb::arg("compute_data_type") = DataType::NotSet, nb::arg("name") = "",
      "max(input, lower_clip) (leaky below it with negative_slope), then min(., upper_clip).");
  cls.def(
      "relu_backward",
      [](PyGraph& g, TensorOrScalar loss, TensorOrScalar input, Opt lower_clip, DataType compute,
         std::string name) {
        ir::PointwiseAttrs a = pw(PointwiseMode::ReluBwd);
        a.relu_lower_clip = lower_clip;
        return add_pointwise(g, a, loss, input, {}, compute, std::move(name));
      },
      nb::arg("loss"), nb::arg("input"), nb::arg("lower_clip").none() = nb::none(),
      nb::arg("compute_data_type") = DataType::NotSet, nb::arg("name") = "");
}

// The modes with an attribute (elu, softplus, swish, ...), gen_index and the generic pointwise.
void def_with_attrs(nb::class_<PyGraph>& cls) {
  // Modes with one attribute each: (method, mode, attribute keyword, member).
  struct WithAttr {
    const char* method;
    PointwiseMode mode;
    bool backward;
    const char* kw;
    std::optional<double> ir::PointwiseAttrs::*member;
  };
  static const WithAttr kWithAttr[] = {
      {"silu", PointwiseMode::Silu, false, "swish_beta", &ir::PointwiseAttrs::swish_beta},
      {"swish", PointwiseMode::Silu, false, "swish_beta", &ir::PointwiseAttrs::swish_beta},
      {"elu", PointwiseMode::Elu, false, "alpha", &ir::PointwiseAttrs::elu_alpha},
      {"softplus", PointwiseMode::Softplus, false, "beta", &ir::PointwiseAttrs::softplus_beta},
      {"silu_backward", PointwiseMode::SiluBwd, true, "swish_beta",
       &ir::PointwiseAttrs::swish_beta},
      {"elu_backward", PointwiseMode::EluBwd, true, "alpha", &ir::PointwiseAttrs::elu_alpha},
      {"softplus_backward", PointwiseMode::SoftplusBwd, true, "beta",
       &ir::PointwiseAttrs::softplus_beta},
  };
  for (const WithAttr& w : kWithAttr) {
    const PointwiseMode mode = w.mode;
    auto member = w.member;
    if (w.backward) {
      cls.def(
          w.method,
          [mode, member](PyGraph& g, TensorOrScalar loss, TensorOrScalar input, Opt v,
                         DataType compute, std::string name) {
            ir::PointwiseAttrs a = pw(mode);
            a.*member = v;
            return add_pointwise(g, a, loss, input, {}, compute, std::move(name));
          },
          nb::arg("loss"), nb::arg("input"), nb::arg(w.kw).none() = nb::none(),
          nb::arg("compute_data_type") = DataType::NotSet, nb::arg("name") = "");
    } else {
      cls.def(
          w.method,
          [mode, member](PyGraph& g, TensorOrScalar input, Opt v, DataType compute,
                         std::string name) {
            ir::PointwiseAttrs a = pw(mode);
            a.*member = v;
            return add_pointwise(g, a, input, {}, {}, compute, std::move(name));
          },
          nb::arg("input"), nb::arg(w.kw).none() = nb::none(),
          nb::arg("compute_data_type") = DataType::NotSet, nb::arg("name") = "");
    }
  }

  cls.def(
      "gen_index",
      [](PyGraph& g, TensorOrScalar input, int64_t axis, DataType compute, std::string name) {
        ir::PointwiseAttrs a = pw(PointwiseMode::GenIndex);
        a.axis = axis;
        return add_pointwise(g, a, input, {}, {}, compute, std::move(name));
      },
      nb::arg("input"), nb::arg("axis"), nb::arg("compute_data_type") = DataType::NotSet,
      nb::arg("name") = "",
      "Y = the index of each element of input along axis (its values are not read); set Y's "
      "data type (e.g. INT32) as the frontend's masks do.");
  cls.def(
      "pointwise",
      [](PyGraph& g, PointwiseMode mode, TensorOrScalar input0, In input1, In input2,
         Opt lower_clip, Opt upper_clip, Opt negative_slope, Opt alpha, Opt beta, Opt swish_beta,
         DataType compute, std::string name) {
        ir::PointwiseAttrs a = pw(mode);
        a.relu_lower_clip = lower_clip;
        a.relu_upper_clip = upper_clip;
        a.relu_lower_clip_slope = negative_slope;
        a.elu_alpha = alpha;
        a.softplus_beta = beta;
        a.swish_beta = swish_beta;
        return add_pointwise(g, a, input0, input1, input2, compute, std::move(name));
      },
      nb::arg("mode"), nb::arg("input0"), nb::arg("input1").none() = nb::none(),
      nb::arg("input2").none() = nb::none(), nb::kw_only(),
      nb::arg("lower_clip").none() = nb::none(), nb::arg("upper_clip").none() = nb::none(),
      nb::arg("negative_slope").none() = nb::none(), nb::arg("alpha").none() = nb::none(),
      nb::arg("beta").none() = nb::none(), nb::arg("swish_beta").none() = nb::none(),
      nb::arg("compute_data_type") = DataType::NotSet, nb::arg("name") = "",
      "Any pointwise_mode with 1 to 3 inputs; the mode's attributes as keywords.");
}

}  // namespace

void bind_op_pointwise(nb::class_<PyGraph>& cls) {
  def_per_mode(cls);
  def_named(cls);
  def_with_attrs(cls);
  frontend_forms(cls);
}

}  // namespace dnngraph::py
