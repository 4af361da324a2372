// Enumerations under the tutorial's names: data_type.HALF, heur_mode.A, ...
#include <deque>

#include "common.hpp"

namespace dnngraph::py {

namespace {
// nanobind keeps the value names as given; the names produced by the library's *_name()
// functions are stored here so they outlive the module's initialisation.
const char* keep(std::string_view s) {
  static std::deque<std::string> names;
  return names.emplace_back(s).c_str();
}
}  // namespace

void bind_enums(nb::module_& m) {
  nb::enum_<DataType>(m, "data_type", "Element types of tensors")
      .value("NOT_SET", DataType::NotSet)
      .value("FLOAT", DataType::Float)
      .value("DOUBLE", DataType::Double)
      .value("HALF", DataType::Half)
      .value("BFLOAT16", DataType::BFloat16)
      .value("FP8_E4M3", DataType::FP8_E4M3)
      .value("FP8_E5M2", DataType::FP8_E5M2)
      .value("INT8", DataType::Int8)
      .value("UINT8", DataType::UInt8)
      .value("INT32", DataType::Int32)
      .value("INT64", DataType::Int64)
      .value("BOOLEAN", DataType::Boolean)
      .value("FP8_E8M0", DataType::FP8_E8M0)
      .value("FP4_E2M1", DataType::FP4_E2M1);

  nb::enum_<HeurMode>(m, "heur_mode", "Heuristic modes that propose engine configurations")
      .value("A", HeurMode::A)
      .value("B", HeurMode::B)
      .value("FALLBACK", HeurMode::Fallback);

  nb::enum_<BuildPlanPolicy>(m, "build_plan_policy", "Which supported plans build_plans builds")
      .value("HEURISTICS_CHOICE", BuildPlanPolicy::HeuristicsChoice)
      .value("ALL", BuildPlanPolicy::All);

  nb::enum_<DiagonalAlignment>(m, "diagonal_alignment", "Anchor of the SDPA diagonal band mask")
      .value("TOP_LEFT", DiagonalAlignment::TopLeft)
      .value("BOTTOM_RIGHT", DiagonalAlignment::BottomRight);

  nb::enum_<NormForwardPhase>(m, "norm_forward_phase", "Training or inference normalization")
      .value("TRAINING", NormForwardPhase::Training)
      .value("INFERENCE", NormForwardPhase::Inference);

  // The op-mode enums take their names from the library so the two never drift apart.
  nb::enum_<ReductionMode> red(m, "reduction_mode", "Reduction operators");
  for (int i = 0; i <= static_cast<int>(ReductionMode::Norm2); ++i) {
    auto v = static_cast<ReductionMode>(i);
    red.value(keep(reduction_mode_name(v)), v);
  }
  nb::enum_<PointwiseMode> pw(m, "pointwise_mode", "Pointwise operators (see pygraph.pointwise)");
  for (int i = 0; i < kPointwiseModeCount; ++i) {
    auto v = static_cast<PointwiseMode>(i);
    pw.value(keep(pointwise_mode_name(v)), v);
  }
}

}  // namespace dnngraph::py
