// PlanCache: a bounded LRU in memory in front of the SQLite store, configured from the
// environment for the process-wide instance.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <list>
#include <mutex>
#include <set>
#include <unordered_map>

#include <unistd.h>

#include "dnngraph/plan_cache.hpp"

namespace dnngraph {

void warn(const std::string& message) {
  static std::mutex mu;
  static std::set<std::string> said;
  std::lock_guard<std::mutex> lock(mu);
  if (!said.insert(message).second) return;
  std::fprintf(stderr, "[dnngraph] warning: %s\n", message.c_str());
}

struct PlanCache::Impl {
  size_t capacity;
  mutable std::mutex mu;
  std::list<std::pair<std::string, PlanCacheEntry>> lru;  // most recent first
  std::unordered_map<std::string, decltype(lru)::iterator> index;
  std::unique_ptr<PlanStore> store;
  PlanCacheStats stats;

  void remember(const std::string& key, const PlanCacheEntry& e) {
    auto it = index.find(key);
    if (it != index.end()) lru.erase(it->second);
    lru.emplace_front(key, e);
    index[key] = lru.begin();
    while (lru.size() > capacity) {
      index.erase(lru.back().first);
      lru.pop_back();
    }
  }
};

namespace {

// Opens (creating the folder) the store in `dir`; a file SQLite cannot use is moved aside
// with a warning and a new one created.
std::unique_ptr<PlanStore> open_store(const std::string& dir, int64_t max_bytes) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    warn("plan cache: cannot create '" + dir + "' (" + ec.message() +
         "); plans are kept in memory only");
    return nullptr;
  }
  const std::string path = (std::filesystem::path(dir) / "plans.sqlite3").string();
  auto s = PlanStore::open(path, max_bytes);
  if (s) return std::move(s).value();
  // Only a file SQLite cannot read is moved aside; one that is merely busy (or a build without
  // SQLite) leaves plans in memory for this process.
  if (s.status().code() != ErrorCode::InvalidArgument) {
    warn(s.status().message() + "; plans are kept in memory only");
    return nullptr;
  }
  const std::string aside = path + ".corrupt." + std::to_string(::getpid());
  warn(s.status().message() + "; moved to '" + aside + "' and started a new one");
  std::filesystem::rename(path, aside, ec);
  for (const char* suffix : {"-wal", "-shm"}) std::filesystem::remove(path + suffix, ec);
  s = PlanStore::open(path, max_bytes);
  if (s) return std::move(s).value();
  warn(s.status().message() + "; plans are kept in memory only");
  return nullptr;
}

std::mutex global_mu;
std::unique_ptr<PlanCache> global_cache;
bool global_done = false;

}  // namespace

PlanCache::PlanCache(size_t capacity, std::string dir, int64_t disk_bytes)
    : impl_(std::make_unique<Impl>()) {
  impl_->capacity = std::max<size_t>(capacity, 1);
  if (!dir.empty()) impl_->store = open_store(dir, disk_bytes);
}
PlanCache::~PlanCache() = default;

PlanCache* PlanCache::global() {
  std::lock_guard<std::mutex> lock(global_mu);
  if (global_done) return global_cache.get();
  global_done = true;
  const char* mode = std::getenv("DNNGRAPH_CACHE");
  const std::string m = mode ? mode : "";
  if (m == "0" || m == "off" || m == "false") return nullptr;
  std::string dir;
  if (m != "memory") {
    if (const char* d = std::getenv("DNNGRAPH_CACHE_DIR"); d && *d) {
      dir = d;  // asked for: a build without SQLite warns that it cannot use it
    } else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) {
      dir = std::string(x) + "/dnngraph";
    } else if (const char* h = std::getenv("HOME"); h && *h) {
      dir = std::string(h) + "/.cache/dnngraph";
    }
#ifndef DNNGRAPH_WITH_SQLITE
    // Built without SQLite (e.g. `pip install .` without libsqlite3-dev): the default cache is
    // kept in memory, without a warning in every process.
    if (const char* d = std::getenv("DNNGRAPH_CACHE_DIR"); !d || !*d) dir.clear();
#endif
  }
  size_t capacity = 256;
  if (const char* c = std::getenv("DNNGRAPH_CACHE_SIZE"); c && std::atoll(c) > 0)
    capacity = static_cast<size_t>(std::atoll(c));
  int64_t disk_mb = 512;
  if (const char* c = std::getenv("DNNGRAPH_CACHE_DISK_MB"); c && *c) {
    char* end = nullptr;
    const long long v = std::strtoll(c, &end, 10);
    if (*end == '\0' && v >= 0 && v <= (int64_t{1} << 40))
      disk_mb = v;
    else
      warn(std::string("DNNGRAPH_CACHE_DISK_MB='") + c +
           "' is not a number of megabytes (0 for no limit); the plan cache on disk keeps "
           "at most 512 MB");
  }
  global_cache = std::make_unique<PlanCache>(capacity, dir, disk_mb * 1024 * 1024);
  return global_cache.get();
}

void PlanCache::reset_global() {
  std::lock_guard<std::mutex> lock(global_mu);
  global_cache.reset();
  global_done = false;
}

std::optional<PlanCacheEntry> PlanCache::get(const std::string& key) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto it = impl_->index.find(key);
  if (it != impl_->index.end()) {
    impl_->lru.splice(impl_->lru.begin(), impl_->lru, it->second);
    ++impl_->stats.memory_hits;
    return it->second->second;
  }
  if (impl_->store) {
    std::string warning;
    auto r = impl_->store->get(key, &warning);
    if (!warning.empty()) {
      warn(warning);
      ++impl_->stats.dropped;
    }
    if (!r) {
      warn(r.status().message() + " (the graph is built without the disk cache)");
    } else if (r->has_value()) {
      ++impl_->stats.disk_hits;
      impl_->remember(key, **r);
      return *r;
    }
  }
  ++impl_->stats.misses;
  return std::nullopt;
}

void PlanCache::put(const std::string& key, const PlanCacheEntry& e) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->remember(key, e);
  ++impl_->stats.stores;
  if (impl_->store)
    if (Status s = impl_->store->put(key, e); !s) warn(s.message());
}

void PlanCache::drop(const std::string& key, const std::string& why) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  warn("plan cache: " + why + "; the entry was dropped and the graph is built again");
  ++impl_->stats.dropped;
  auto it = impl_->index.find(key);
  if (it != impl_->index.end()) {
    impl_->lru.erase(it->second);
    impl_->index.erase(it);
  }
  if (impl_->store)
    if (Status s = impl_->store->erase(key); !s) warn(s.message());
}

PlanCacheStats PlanCache::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->stats;
}

std::string PlanCache::disk_path() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->store ? impl_->store->path() : std::string();
}

}  // namespace dnngraph
