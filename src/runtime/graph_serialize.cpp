// Graph::serialize / deserialize: a JSON envelope around the graph description and, where the
// engine supports it, the engine's own plan bytes (base64).
#include <nlohmann/json.hpp>

#include "dnngraph/graph.hpp"
#include "dnngraph/ir/json.hpp"
#include "runtime/pipeline.hpp"

namespace dnngraph {
namespace {

constexpr int kEnvelopeVersion = 1;
constexpr const char* kB64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string base64_encode(std::string_view in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8) | uint8_t(in[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out += kB64[(v >> s) & 63];
  }
  if (i < in.size()) {
    uint32_t v = uint8_t(in[i]) << 16;
    if (i + 1 < in.size()) v |= uint8_t(in[i + 1]) << 8;
    out += kB64[(v >> 18) & 63];
    out += kB64[(v >> 12) & 63];
    out += i + 1 < in.size() ? kB64[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

Result<std::string> base64_decode(std::string_view in) {
  auto val = [](char c) -> int {
    const char* p = std::char_traits<char>::find(kB64, 64, c);
    return p ? static_cast<int>(p - kB64) : -1;
  };
  if (in.size() % 4) return make_error(ErrorCode::InvalidArgument, "plan bytes: bad base64 length");
  std::string out;
  for (size_t i = 0; i < in.size(); i += 4) {
    uint32_t v = 0;
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = in[i + k];
      int d = 0;
      if (c == '=' && i + 4 == in.size() && k >= 2) {
        ++pad;
      } else if ((d = val(c)) < 0 || pad) {
        return make_error(ErrorCode::InvalidArgument, "plan bytes: bad base64 character");
      }
      v = (v << 6) | static_cast<uint32_t>(d);
    }
    out += static_cast<char>((v >> 16) & 255);
    if (pad < 2) out += static_cast<char>((v >> 8) & 255);
    if (pad < 1) out += static_cast<char>(v & 255);
  }
  return out;
}

}  // namespace

Result<std::string> Graph::serialize() const {
  if (state_->selected < 0)
    return make_error(ErrorCode::InvalidArgument, "graph '", name(),
                      "': serialize() needs a built plan (call build_plans() first)");
  const size_t ci = state_->supported[static_cast<size_t>(state_->selected)];
  nlohmann::json env;
  env["format"] = "dnngraph-built-graph";
  env["version"] = kEnvelopeVersion;
  env["graph"] = ir::to_json(*this, -1);
  env["engine"] = std::string(state_->engine->name());
  env["candidate"] = state_->statuses[ci].info.name;
  auto plan = state_->plans[static_cast<size_t>(state_->selected)]->serialize();
  env["plan"] = plan ? nlohmann::json(base64_encode(*plan)) : nlohmann::json(nullptr);
  return env.dump();
}

// A restored plan stands alone: no heuristics, no compilation.
void Graph::adopt_plan(std::unique_ptr<Plan> plan, const std::string& candidate) {
  state_->candidates.clear();
  state_->checked = 0;
  CandidateInfo info;
  info.engine = std::string(state_->engine->name());
  info.name = candidate;
  info.workspace_size = plan->workspace_size();
  state_->statuses = {CandidateStatus{info, Status::ok(), true, plan->workspace_size()}};
  state_->supported = {0};
  state_->plans.clear();
  state_->plans.push_back(std::move(plan));
  state_->selected = 0;
  state_->stage = Stage::Built;
}

Status Graph::restore_plan(const HandlePtr& handle, Engine& engine, std::string_view bytes) {
  nlohmann::json env;
  try {
    env = nlohmann::json::parse(bytes);
  } catch (const std::exception& e) {
    return make_error(ErrorCode::InvalidArgument, "not a dnngraph built graph: ", e.what());
  }
  if (!env.is_object() || env.value("format", "") != "dnngraph-built-graph" ||
      env.value("version", 0) != kEnvelopeVersion || !env.contains("plan") ||
      !env["plan"].is_string() || !env.contains("candidate") || !env["candidate"].is_string() ||
      env.value("engine", "") != engine.name())
    return make_error(ErrorCode::InvalidArgument, "not a dnngraph built graph of engine '",
                      engine.name(), "' with a stored plan");
  DNNGRAPH_ASSIGN_OR_RETURN(auto raw, base64_decode(env["plan"].get<std::string>()));
  DNNGRAPH_TRY(validate());
  ir::ValidatedGraphPtr snapshot = validated();
  DNNGRAPH_ASSIGN_OR_RETURN(auto plan, engine.deserialize_plan(snapshot, *handle, raw));
  KernelCachePtr cache = std::move(state_->kernel_cache);
  GraphSettings settings = std::move(state_->settings);
  *state_ = PipelineState{};
  state_->settings = std::move(settings);
  state_->validated = std::move(snapshot);
  state_->kernel_cache = std::move(cache);
  state_->handle = handle;
  state_->engine = &engine;
  set_required();
  adopt_plan(std::move(plan), env["candidate"].get<std::string>());
  return Status::ok();
}

Status Graph::deserialize(const HandlePtr& handle, std::string_view bytes) {
  nlohmann::json env;
  try {
    env = nlohmann::json::parse(bytes);
  } catch (const std::exception& e) {
    return make_error(ErrorCode::InvalidArgument,
                      "deserialize: not a dnngraph built graph: ", e.what());
  }
  if (!env.is_object() || env.value("format", "") != "dnngraph-built-graph")
    return make_error(ErrorCode::InvalidArgument,
                      "deserialize: not a dnngraph built graph (format field missing)");
  if (env.value("version", 0) != kEnvelopeVersion)
    return make_error(ErrorCode::InvalidArgument, "deserialize: envelope version ",
                      env.value("version", 0), " is not supported (expected ", kEnvelopeVersion,
                      ")");
  if (!env.contains("graph") || !env["graph"].is_string() || !env.contains("candidate") ||
      !env["candidate"].is_string() || !env.contains("engine") || !env["engine"].is_string())
    return make_error(ErrorCode::InvalidArgument,
                      "deserialize: fields 'graph', 'engine' and 'candidate' must be strings");
  ir::Graph fresh;
  DNNGRAPH_TRY(ir::from_json(env["graph"].get<std::string>(), fresh));
  static_cast<ir::Graph&>(*this) = std::move(fresh);
  DNNGRAPH_TRY(build_operation_graph(handle));
  const std::string engine = env["engine"].get<std::string>();
  if (state_->engine->name() != engine)
    return make_error(ErrorCode::NotSupported, "deserialize: graph '", name(),
                      "' was built by engine '", engine, "', but this handle (",
                      handle->device().to_string(), ") uses '", state_->engine->name(), "'");
  const std::string want = env["candidate"].get<std::string>();
  if (env.contains("plan") && env["plan"].is_string()) {
    DNNGRAPH_ASSIGN_OR_RETURN(auto raw, base64_decode(env["plan"].get<std::string>()));
    auto plan = state_->engine->deserialize_plan(state_->validated, *handle, raw);
    if (plan) {
      adopt_plan(std::move(plan).value(), want);
      return Status::ok();
    }
  }
  // No stored plan (or the engine could not load it): rebuild the named candidate.
  DNNGRAPH_TRY(create_execution_plans({HeurMode::A, HeurMode::B, HeurMode::Fallback}));
  DNNGRAPH_TRY(check_support());
  for (int64_t i = 0; check_until(i); ++i)
    if (state_->statuses[state_->supported[static_cast<size_t>(i)]].info.name == want)
      return select_plan(i);
  return make_error(ErrorCode::NotSupported, "deserialize: graph '", name(), "': candidate '", want,
                    "' is not offered on ", handle->device().to_string());
}

}  // namespace dnngraph
