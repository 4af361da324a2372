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
  // A cache that starts from bytes of serialize() (or a file of save()). The bytes carry a
  // header (format version, engine, length, XXH3 checksum) checked here: anything else, or
  // damaged bytes, is an InvalidArgument error saying so (cuDNN itself accepts garbage).
  static Result<std::shared_ptr<KernelCache>> from_bytes(std::string_view bytes);
  static Result<std::shared_ptr<KernelCache>> load(const std::string& path);
  // A cache that starts from an engine's own form of its kernels (for the cuDNN engine: the
  // JSON of CUDNN_ATTR_KERNEL_CACHE_JSON_REPRESENTATION), checked by that engine at first use.
  static std::shared_ptr<KernelCache> from_engine_bytes(std::string engine, std::string payload);

  // Fills this cache in place (the frontend's KernelCache.deserialize()): from bytes of
  // serialize() or save(), checked as from_bytes() checks them, or from an engine's own form as
  // from_engine_bytes() takes it. Refused (InvalidArgument) when there is nothing to load or when
  // the cache already holds kernels: an engine set it up (in_use()) or it was created from, or
  // deserialized from, bytes before. Graphs already given the cache load the kernels at their
  // first dynamic-shape build on that engine.
  Status deserialize(std::string_view bytes);
  Status deserialize_engine_bytes(std::string engine, std::string payload);

  // The engine's kernels as bytes with the header above. Before any graph used the cache: the
  // bytes it was created from, else an error saying so.
  Result<std::string> serialize() const;
  // Writes serialize() to `path` (through a temporary file and a rename).
  Status save(const std::string& path) const;
  // Whether an engine has set up its cache here (a dynamic-shape graph was built with it).
  bool in_use() const;

  // For engines: the lock that guards the backend, the backend and the bytes to start from.
  std::mutex& mutex() const { return mu_; }
  std::unique_ptr<KernelCacheBackend>& backend() { return backend_; }
  // The engine payload to start from, and the engine it belongs to ("" when none).
  const std::string& initial_bytes() const { return initial_; }
  const std::string& initial_engine() const { return initial_engine_; }

 private:
  mutable std::mutex mu_;
  std::unique_ptr<KernelCacheBackend> backend_;
  std::string initial_;
  std::string initial_engine_;
};

using KernelCachePtr = std::shared_ptr<KernelCache>;

}  // namespace dnngraph
