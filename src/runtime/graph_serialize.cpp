// Graph::serialize / deserialize: a JSON envelope around the graph description and, where the
// engine supports it, the engine's own plan bytes (base64).
#include <mutex>
#include <nlohmann/json.hpp>
#include <shared_mutex>

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
  std::shared_lock<std::shared_mutex> lock(state_->mu);
  return serialize_unlocked();
}

Result<std::string> Graph::serialize_unlocked() const {
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
  env["engine_id"] = state_->statuses[ci].info.engine_id;
  nlohmann::json knobs = nlohmann::json::object();
  for (const auto& [k, v] : state_->statuses[ci].info.knobs) knobs[k] = v;
  env["knobs"] = std::move(knobs);
  auto plan = state_->plans[static_cast<size_t>(state_->selected)]->serialize();
  env["plan"] = plan ? nlohmann::json(base64_encode(*plan)) : nlohmann::json(nullptr);
  // Built deviceless: the GPU it was built for, checked against the device deserialize() gets.
  if (state_->handle && state_->handle->target())
    env["target"] = state_->handle->target()->to_json();
  return env.dump();
}

namespace {
// The stored candidate of an envelope whose "candidate" is a string: its name, engine id and
// knobs (engine_id -1 when the envelope predates them; fields of another type are ignored).
CandidateInfo stored_candidate(const nlohmann::json& env) {
  CandidateInfo info;
  info.name = env["candidate"].get<std::string>();
  auto id = env.find("engine_id");
  info.engine_id = id != env.end() && id->is_number_integer() ? id->get<int64_t>() : -1;
  auto knobs = env.find("knobs");
  if (knobs != env.end() && knobs->is_object())
    for (const auto& [k, v] : knobs->items())
      if (v.is_number_integer()) info.knobs.emplace_back(k, v.get<int64_t>());
  return info;
}

// A graph built deviceless (its envelope has "target") runs only on a GPU of the compute
// capability it was built for: refuse another, saying what differs.
Status check_target(const nlohmann::json& env, const Handle& handle, const std::string& graph) {
  auto it = env.find("target");
  if (it == env.end()) return Status::ok();
  if (!it->is_string())
    return make_error(ErrorCode::InvalidArgument,
                      "deserialize: field 'target' must be the device properties JSON as a string");
  DNNGRAPH_ASSIGN_OR_RETURN(auto target, DeviceProperties::from_json(it->get<std::string>()));
  if (handle.device().kind != Device::Kind::CUDA) return Status::ok();  // the engine check says
  DNNGRAPH_ASSIGN_OR_RETURN(auto here, DeviceProperties::from_handle(handle));
  if (target->compatible_with(*here)) return Status::ok();
  return make_error(ErrorCode::InvalidArgument, "deserialize: graph '", graph,
                    "' was built ahead of time for ", target->describe(), ", but ",
                    handle.device().to_string(), " is ", here->describe(), " (",
                    target->differences(*here),
                    "); its plan cannot run there: build it again for this device (its "
                    "create_device_properties(), or a handle on it)");
}

}  // namespace

// A restored plan stands alone: no heuristics, no compilation.
void Graph::adopt_plan(std::unique_ptr<Plan> plan, CandidateInfo info) {
  state_->candidates.clear();
  state_->checked = 0;
  info.engine = std::string(state_->engine->name());
  info.workspace_size = plan->workspace_size();
  state_->statuses = {CandidateStatus{info, Status::ok(), true, plan->workspace_size()}};
  state_->supported = {0};
  state_->plans.clear();
  state_->plans.push_back(std::move(plan));
  state_->selected = 0;
  state_->stage = Stage::Built;
}

// Called by build() with the graph's lock held alone.
Status Graph::restore_plan(const HandlePtr& handle, Engine& engine, std::string_view bytes) {
  nlohmann::json env;
  try {
    env = nlohmann::json::parse(bytes);
  } catch (const std::exception& e) {
    return make_error(ErrorCode::InvalidArgument, "not a dnngraph built graph: ", e.what());
  }
  // Read without json::value(), which throws on a field of another type (the stored bytes
  // come from a file on disk).
  auto text = [&env](const char* key) {
    auto it = env.find(key);
    return it != env.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  auto vit = env.is_object() ? env.find("version") : env.end();
  if (!env.is_object() || text("format") != "dnngraph-built-graph" || vit == env.end() ||
      !vit->is_number_integer() || *vit != kEnvelopeVersion || !env.contains("plan") ||
      !env["plan"].is_string() || !env.contains("candidate") || !env["candidate"].is_string() ||
      text("engine") != engine.name())
    return make_error(ErrorCode::InvalidArgument, "not a dnngraph built graph of engine '",
                      engine.name(), "' with a stored plan");
  DNNGRAPH_ASSIGN_OR_RETURN(auto raw, base64_decode(env["plan"].get<std::string>()));
  DNNGRAPH_TRY(validate());
  ir::ValidatedGraphPtr snapshot = validated();
  DNNGRAPH_ASSIGN_OR_RETURN(auto plan, engine.deserialize_plan(snapshot, *handle, raw));
  state_->reset();  // keeps the lock, the kernel cache and the settings
  state_->validated = std::move(snapshot);
  state_->handle = handle;
  state_->engine = &engine;
  set_required();
  adopt_plan(std::move(plan), stored_candidate(env));
  return Status::ok();
}

Status Graph::deserialize(const HandlePtr& handle, std::string_view bytes) {
  std::unique_lock<std::shared_mutex> lock(state_->mu);
  // No exception of the JSON library leaves: a blob is untrusted input.
  try {
    return deserialize_unlocked(handle, bytes);
  } catch (const std::exception& e) {
    return make_error(ErrorCode::InvalidArgument, "deserialize: malformed built graph: ", e.what());
  }
}

Status Graph::deserialize_unlocked(const HandlePtr& handle, std::string_view bytes) {
  nlohmann::json env;
  try {
    env = nlohmann::json::parse(bytes);
  } catch (const std::exception& e) {
    return make_error(ErrorCode::InvalidArgument,
                      "deserialize: not a dnngraph built graph: ", e.what());
  }
  if (!env.is_object() || !env.contains("format") || !env["format"].is_string() ||
      env["format"].get<std::string>() != "dnngraph-built-graph")
    return make_error(ErrorCode::InvalidArgument,
                      "deserialize: not a dnngraph built graph (format field missing)");
  const nlohmann::json version = env.contains("version") ? env["version"] : nlohmann::json();
  if (!version.is_number_integer() || version.get<int64_t>() != kEnvelopeVersion ||
      (version.is_number_unsigned() && version.get<uint64_t>() != kEnvelopeVersion))
    return make_error(ErrorCode::InvalidArgument, "deserialize: envelope version ", version.dump(),
                      " is not supported (expected ", kEnvelopeVersion,
                      "); serialize the graph again with this version of dnngraph");
  if (!env.contains("graph") || !env["graph"].is_string() || !env.contains("candidate") ||
      !env["candidate"].is_string() || !env.contains("engine") || !env["engine"].is_string())
    return make_error(ErrorCode::InvalidArgument,
                      "deserialize: fields 'graph', 'engine' and 'candidate' must be strings");
  ir::Graph fresh;
  DNNGRAPH_TRY(ir::from_json(env["graph"].get<std::string>(), fresh));
  if (handle) DNNGRAPH_TRY(check_target(env, *handle, fresh.name()));
  static_cast<ir::Graph&>(*this) = std::move(fresh);
  DNNGRAPH_TRY(build_operation_graph_unlocked(handle));
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
      adopt_plan(std::move(plan).value(), stored_candidate(env));
      return Status::ok();
    }
  }
  // No stored plan (or the engine could not load it): rebuild the named candidate.
  DNNGRAPH_TRY(create_execution_plans_unlocked({HeurMode::A, HeurMode::B, HeurMode::Fallback}));
  DNNGRAPH_TRY(check_support_unlocked());
  for (int64_t i = 0; check_until(i); ++i)
    if (state_->statuses[state_->supported[static_cast<size_t>(i)]].info.name == want) {
      DNNGRAPH_TRY(build_plan_at_index_unlocked(i));
      state_->selected = i;
      return Status::ok();
    }
  return make_error(ErrorCode::NotSupported, "deserialize: graph '", name(), "': candidate '", want,
                    "' is not offered on ", handle->device().to_string());
}

}  // namespace dnngraph
