// A cache of compiled kernels that graphs with dynamic shapes share (the cuDNN backend's
// kernel cache): a graph of a new shape reuses the kernels an earlier shape compiled.
// Thread-safe; serializable to bytes and to a file so that a new process starts warm.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "dnngraph/status.hpp"

namespace dnngraph {

// What an engine keeps in a KernelCache (the cuDNN engine: its kernel cache descriptor).
class KernelCacheBackend {
 public:
  virtual ~KernelCacheBackend() = default;
  virtual std::string_view engine() const = 0;
  virtual Result<std::string> serialize() const = 0;
};

class KernelCache {
 public:
  static std::shared_ptr<KernelCache> create();
  // A cache that starts from bytes of serialize() (or of save()); the bytes are checked by the
  // engine when the first graph uses the cache.
  static std::shared_ptr<KernelCache> from_bytes(std::string bytes);
  static Result<std::shared_ptr<KernelCache>> load(const std::string& path);

  // The engine's kernels as bytes. Before any graph used the cache: the bytes it was created
  // from, else an error saying so.
  Result<std::string> serialize() const;
  // Writes serialize() to `path` (through a temporary file and a rename).
  Status save(const std::string& path) const;
  // Whether an engine has set up its cache here (a dynamic-shape graph was built with it).
  bool in_use() const;

  // For engines: the lock that guards the backend, the backend and the bytes to start from.
  std::mutex& mutex() const { return mu_; }
  std::unique_ptr<KernelCacheBackend>& backend() { return backend_; }
  const std::string& initial_bytes() const { return initial_; }

 private:
  mutable std::mutex mu_;
  std::unique_ptr<KernelCacheBackend> backend_;
  std::string initial_;
};

using KernelCachePtr = std::shared_ptr<KernelCache>;

}  // namespace dnngraph
