// The plan cache: built plans kept by (graph fingerprint, device, backend version, policy), in
// memory (a bounded, thread-safe LRU) and on disk (SQLite), so that a graph built once on a
// machine is restored without heuristics or compilation, in this process and the next.
//
// On disk: $DNNGRAPH_CACHE_DIR, else $XDG_CACHE_HOME/dnngraph, else ~/.cache/dnngraph (file
// plans.sqlite3), at most DNNGRAPH_CACHE_DISK_MB megabytes of plans (default 512; 0: no
// limit), the least recently used dropped first. DNNGRAPH_CACHE=0 turns the whole cache off;
// DNNGRAPH_CACHE=memory keeps it in memory only. Safe with many processes at once (SQLite WAL, busy
// timeout); a row whose checksum does not match, or whose plan the backend refuses, is dropped with
// a warning and the graph is built again.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "dnngraph/status.hpp"

namespace dnngraph {

struct PlanCacheEntry {
  std::string engine_config;  // the chosen candidate's name
  double time_ms = -1;        // measured by the autotuner; -1 when not measured
  std::string plan;           // Graph::serialize() bytes
};

// One SQLite file. Every call is thread-safe; several processes may share the file.
// `max_bytes` > 0 bounds the plans' bytes (keys, names and plans): a store past it drops the
// least recently used rows (by their last store or hit) until 90% of it is left.
class PlanStore {
 public:
  static Result<std::unique_ptr<PlanStore>> open(const std::string& path, int64_t max_bytes = 0);
  ~PlanStore();
  // nullopt when absent; a corrupt row (checksum mismatch) is deleted, reported in `warning`.
  Result<std::optional<PlanCacheEntry>> get(const std::string& key, std::string* warning = nullptr);
  Status put(const std::string& key, const PlanCacheEntry& e);
  Status erase(const std::string& key);
  Result<int64_t> size();
  // The bytes the rows hold (what max_bytes bounds).
  Result<int64_t> bytes();
  const std::string& path() const { return path_; }

 private:
  struct Impl;
  PlanStore(std::string path, std::unique_ptr<Impl> impl);
  std::string path_;
  std::unique_ptr<Impl> impl_;
};

struct PlanCacheStats {
  int64_t memory_hits = 0, disk_hits = 0, misses = 0, stores = 0, dropped = 0;
};

class PlanCache {
 public:
  // `dir` empty: memory only. `disk_bytes`: the store's bound (PlanStore::open).
  PlanCache(size_t capacity, std::string dir, int64_t disk_bytes = 0);
  ~PlanCache();
  // The process-wide cache configured from the environment (see above); nullptr when off.
  static PlanCache* global();
  // Re-reads the environment for global() (tests).
  static void reset_global();

  std::optional<PlanCacheEntry> get(const std::string& key);
  void put(const std::string& key, const PlanCacheEntry& e);
  // Drops a key from memory and disk (a restored plan that failed), with a warning.
  void drop(const std::string& key, const std::string& why);
  PlanCacheStats stats() const;
  // The SQLite file, or "" when memory only (or the disk could not be used).
  std::string disk_path() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Prints "[dnngraph] warning: ..." on stderr (once per distinct message and process).
void warn(const std::string& message);

}  // namespace dnngraph
