// KernelCache (dnngraph/engines/kernel_cache.hpp): the part every engine shares (bytes, files,
// locking).
#include "dnngraph/engines/kernel_cache.hpp"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include <xxhash.h>

namespace dnngraph {

std::shared_ptr<KernelCache> KernelCache::create() { return std::make_shared<KernelCache>(); }

namespace {

// "dnngraph kernel cache 1\nengine <name>\nbytes <n>\nxxh3 <16 hex digits>\n\n" + payload.
constexpr std::string_view kMagic = "dnngraph kernel cache 1\n";

std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string wrap(const std::string& engine, const std::string& payload) {
  return detail::cat(kMagic, "engine ", engine, "\nbytes ", payload.size(), "\nxxh3 ",
                     hex64(XXH3_64bits(payload.data(), payload.size())), "\n\n", payload);
}

Status not_a_cache(std::string_view why) {
  return make_error(ErrorCode::InvalidArgument, "kernel cache: ", why,
                    "; expected the bytes KernelCache::serialize() or save() wrote. Delete the "
                    "file and let the cache be rebuilt");
}

// The engine and its payload from bytes of serialize(), checked.
struct Unwrapped {
  std::string engine, payload;
};

Result<Unwrapped> unwrap(std::string_view bytes) {
  if (bytes.substr(0, kMagic.size()) != kMagic)
    return not_a_cache("the bytes do not start with a dnngraph kernel cache header");
  const size_t end = bytes.find("\n\n", kMagic.size());
  if (end == std::string_view::npos) return not_a_cache("the header is cut off");
  std::istringstream head(std::string(bytes.substr(kMagic.size(), end - kMagic.size())));
  std::string k_engine, engine, k_bytes, k_hash, hash;
  uint64_t size = 0;
  if (!(head >> k_engine >> engine >> k_bytes >> size >> k_hash >> hash) || k_engine != "engine" ||
      k_bytes != "bytes" || k_hash != "xxh3")
    return not_a_cache("the header is malformed");
  const std::string_view payload = bytes.substr(end + 2);
  if (payload.size() != size)
    return not_a_cache(detail::cat("the header announces ", size, " bytes of kernels but ",
                                   payload.size(), " follow (a truncated file?)"));
  if (hex64(XXH3_64bits(payload.data(), payload.size())) != hash)
    return not_a_cache("the checksum does not match (damaged bytes)");
  return Unwrapped{std::move(engine), std::string(payload)};
}

}  // namespace

std::shared_ptr<KernelCache> KernelCache::from_engine_bytes(std::string engine,
                                                            std::string payload) {
  auto kc = create();
  kc->initial_engine_ = std::move(engine);
  kc->initial_ = std::move(payload);
  return kc;
}

Result<std::shared_ptr<KernelCache>> KernelCache::from_bytes(std::string_view bytes) {
  DNNGRAPH_ASSIGN_OR_RETURN(auto u, unwrap(bytes));
  return from_engine_bytes(std::move(u.engine), std::move(u.payload));
}

Status KernelCache::deserialize(std::string_view bytes) {
  DNNGRAPH_ASSIGN_OR_RETURN(auto u, unwrap(bytes));
  return deserialize_engine_bytes(std::move(u.engine), std::move(u.payload));
}

Status KernelCache::deserialize_engine_bytes(std::string engine, std::string payload) {
  if (payload.empty())
    return make_error(ErrorCode::InvalidArgument, "kernel cache: deserialize() got no kernels (",
                      engine.empty() ? std::string("no engine") : "engine '" + engine + "'",
                      ", 0 bytes); pass what serialize() returned for a cache that a "
                      "dynamic-shape graph was built with");
  std::lock_guard<std::mutex> lock(mu_);
  if (backend_)
    return make_error(ErrorCode::InvalidArgument,
                      "kernel cache: deserialize() into a cache that engine '", backend_->engine(),
                      "' already uses (a dynamic-shape graph was built with it); deserialize into "
                      "a new cache from create_kernel_cache() before building graphs with it");
  if (!initial_.empty())
    return make_error(ErrorCode::InvalidArgument,
                      "kernel cache: deserialize() into a cache that already holds kernels of "
                      "engine '",
                      initial_engine_, "' (", initial_.size(),
                      " bytes, from from_bytes(), load() or an earlier deserialize()); "
                      "deserialize into a new cache from create_kernel_cache()");
  initial_engine_ = std::move(engine);
  initial_ = std::move(payload);
  return Status::ok();
}

Result<std::shared_ptr<KernelCache>> KernelCache::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return make_error(ErrorCode::InvalidArgument, "kernel cache: cannot open '", path,
                      "' for reading");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (ss.str().empty())
    return make_error(ErrorCode::InvalidArgument, "kernel cache: '", path,
                      "' is empty; expected the bytes KernelCache::save wrote");
  auto kc = from_bytes(ss.str());
  if (!kc) return Status(kc.status().code(), detail::cat("'", path, "': ", kc.status().message()));
  return kc;
}

Result<std::string> KernelCache::serialize() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (backend_) {
    DNNGRAPH_ASSIGN_OR_RETURN(auto payload, backend_->serialize());
    return wrap(std::string(backend_->engine()), payload);
  }
  if (!initial_.empty()) return wrap(initial_engine_, initial_);
  return make_error(ErrorCode::InvalidArgument,
                    "kernel cache: nothing to serialize yet; build a graph with dynamic shapes "
                    "enabled (is_dynamic_shape_enabled) and this cache on a GPU handle first");
}

bool KernelCache::in_use() const {
  std::lock_guard<std::mutex> lock(mu_);
  return backend_ != nullptr;
}

Status KernelCache::save(const std::string& path) const {
  DNNGRAPH_ASSIGN_OR_RETURN(auto bytes, serialize());
  // One temporary file per call (process and call number): concurrent saves, from threads of
  // one process too, each write their own and the last rename wins.
  static std::atomic<uint64_t> calls{0};
  const std::string tmp =
      path + ".tmp" + std::to_string(::getpid()) + "." + std::to_string(calls.fetch_add(1));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out)
      return make_error(ErrorCode::InvalidArgument, "kernel cache: cannot write '", tmp, "'");
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out)
      return make_error(ErrorCode::InvalidArgument, "kernel cache: writing '", tmp, "' failed");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return make_error(ErrorCode::InvalidArgument, "kernel cache: cannot move '", tmp, "' to '",
                      path, "'");
  }
  return Status::ok();
}

}  // namespace dnngraph
