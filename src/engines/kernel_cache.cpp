// KernelCache (dnngraph/engines/kernel_cache.hpp): the part every engine shares (bytes, files,
// locking).
#include "dnngraph/engines/kernel_cache.hpp"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <unistd.h>

namespace dnngraph {

std::shared_ptr<KernelCache> KernelCache::create() { return std::make_shared<KernelCache>(); }

std::shared_ptr<KernelCache> KernelCache::from_bytes(std::string bytes) {
  auto kc = create();
  kc->initial_ = std::move(bytes);
  return kc;
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
  return from_bytes(ss.str());
}

Result<std::string> KernelCache::serialize() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (backend_) return backend_->serialize();
  if (!initial_.empty()) return initial_;
  return make_error(ErrorCode::InvalidArgument,
                    "kernel cache: nothing to serialize yet; build a graph with dynamic shapes "
                    "enabled (is_dynamic_shape_enabled) and this cache on a GPU handle first");
}

bool KernelCache::in_use() const {
  std::lock_guard<std::mutex> lock(mu_);
  return backend_ != nullptr;
}

Status KernelCache::save(const std::string& path) const {
  auto bytes = serialize();
  if (!bytes) return bytes.status();
  // One temporary file per call (process and call number): concurrent saves, from threads of
  // one process too, each write their own and the last rename wins.
  static std::atomic<uint64_t> calls{0};
  const std::string tmp =
      path + ".tmp" + std::to_string(::getpid()) + "." + std::to_string(calls.fetch_add(1));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out)
      return make_error(ErrorCode::InvalidArgument, "kernel cache: cannot write '", tmp, "'");
    out.write(bytes->data(), static_cast<std::streamsize>(bytes->size()));
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
