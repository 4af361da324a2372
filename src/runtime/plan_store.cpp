// PlanStore: one SQLite file of built plans. WAL journal and a busy timeout let several
// processes read and write it at once; every row carries a checksum of its payload so that a
// torn or corrupted row is dropped rather than used.
#include <mutex>

#include "dnngraph/plan_cache.hpp"

#ifdef DNNGRAPH_WITH_SQLITE
#include <sqlite3.h>
#include <xxhash.h>

#include <chrono>
#include <cstdio>
#include <string_view>
#include <thread>
#include <vector>
#endif

namespace dnngraph {

#ifdef DNNGRAPH_WITH_SQLITE
namespace {

int64_t checksum(const PlanCacheEntry& e) {
  XXH3_state_t* s = XXH3_createState();
  XXH3_64bits_reset(s);
  XXH3_64bits_update(s, e.engine_config.data(), e.engine_config.size());
  XXH3_64bits_update(s, &e.time_ms, sizeof e.time_ms);
  XXH3_64bits_update(s, e.plan.data(), e.plan.size());
  const uint64_t h = XXH3_64bits_digest(s);
  XXH3_freeState(s);
  return static_cast<int64_t>(h);
}

// A row's last use (store or hit): microseconds of the system clock, which every process
// sharing the file reads alike.
int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A prepared statement, finalized on scope exit.
struct Stmt {
  sqlite3_stmt* s = nullptr;
  ~Stmt() { sqlite3_finalize(s); }
};

// The bytes a row holds (its key, engine config and plan); ROW is "", "NEW." or "OLD.".
#define PLAN_ROW_BYTES_OF(ROW) \
  "(LENGTH(" ROW "key) + LENGTH(" ROW "engine_config) + LENGTH(" ROW "plan))"
#define PLAN_ROW_BYTES(ROW) "COALESCE(SUM" PLAN_ROW_BYTES_OF(ROW) ", 0)"

}  // namespace

struct PlanStore::Impl {
  sqlite3* db = nullptr;
  std::mutex mu;
  int64_t max_bytes = 0;
  ~Impl() { sqlite3_close(db); }

  Status error(const char* what) const {
    return make_error(ErrorCode::BackendError, "plan cache: ", what, ": ", sqlite3_errmsg(db));
  }
  // Runs `sql`; `rc` (when given) receives SQLite's primary result code.
  Status exec(const char* sql, int* rc = nullptr) {
    char* msg = nullptr;
    const int r = sqlite3_exec(db, sql, nullptr, nullptr, &msg);
    if (rc) *rc = r & 0xff;
    if (r == SQLITE_OK) return Status::ok();
    std::string m = msg ? msg : "unknown error";
    sqlite3_free(msg);
    return make_error(ErrorCode::BackendError, "plan cache: '", sql, "': ", m);
  }
  Status prepare(Stmt& st, const char* sql) {
    if (sqlite3_prepare_v2(db, sql, -1, &st.s, nullptr) != SQLITE_OK) return error(sql);
    return Status::ok();
  }
  // Deletes the row of `key` (absent: nothing); `what` names the deletion in an error.
  Status erase(const std::string& key, const char* what) {
    Stmt del;
    DNNGRAPH_TRY(prepare(del, "DELETE FROM plans WHERE key = ?1"));
    sqlite3_bind_text(del.s, 1, key.data(), static_cast<int>(key.size()), SQLITE_TRANSIENT);
    if (sqlite3_step(del.s) != SQLITE_DONE) return error(what);
    return Status::ok();
  }
  // The rows' payload bytes: a running total that triggers keep in the same transaction as each
  // insert and delete (any process, any version that shares the file), read in O(1).
  Result<int64_t> bytes() {
    Stmt st;
    DNNGRAPH_TRY(prepare(st, "SELECT total FROM plan_bytes WHERE id = 0"));
    const int rc = sqlite3_step(st.s);
    if (rc == SQLITE_ROW) return static_cast<int64_t>(sqlite3_column_int64(st.s, 0));
    if (rc == SQLITE_DONE) return exact_bytes();
    return error("reading the plans' bytes");
  }
  // The same sum over every row (a full scan): the total is set to it before a trim.
  Result<int64_t> exact_bytes() {
    Stmt st;
    DNNGRAPH_TRY(prepare(st, "SELECT " PLAN_ROW_BYTES("") " FROM plans"));
    if (sqlite3_step(st.s) != SQLITE_ROW) return error("summing the plans' bytes");
    const auto total = static_cast<int64_t>(sqlite3_column_int64(st.s, 0));
    Stmt set;
    DNNGRAPH_TRY(prepare(set, "UPDATE plan_bytes SET total = ?1 WHERE id = 0"));
    sqlite3_bind_int64(set.s, 1, total);
    (void)sqlite3_step(set.s);  // a stale total only makes the next trim check again
    return total;
  }
  // Past max_bytes: the least recently used rows go (never `keep`, the row just stored) until
  // 90% of the bound is left.
  Status trim(const std::string& keep) {
    DNNGRAPH_ASSIGN_OR_RETURN(int64_t total, bytes());
    if (total <= max_bytes) return Status::ok();
    DNNGRAPH_ASSIGN_OR_RETURN(total, exact_bytes());  // rare: only past the bound
    if (total <= max_bytes) return Status::ok();
    const int64_t target = max_bytes - max_bytes / 10;
    std::vector<std::string> drop;
    {
      Stmt st;
      DNNGRAPH_TRY(prepare(st,
                           "SELECT key, LENGTH(key) + LENGTH(engine_config) + LENGTH(plan) "
                           "FROM plans ORDER BY used ASC, rowid ASC"));
      int rc;
      while (total > target && (rc = sqlite3_step(st.s)) == SQLITE_ROW) {
        const auto* k = reinterpret_cast<const char*>(sqlite3_column_text(st.s, 0));
        std::string key(k ? k : "", static_cast<size_t>(sqlite3_column_bytes(st.s, 0)));
        if (key == keep) continue;
        total -= sqlite3_column_int64(st.s, 1);
        drop.push_back(std::move(key));
      }
    }
    for (const std::string& key : drop)
      DNNGRAPH_TRY(erase(key, "dropping a least recently used plan"));
    return Status::ok();
  }
};

Result<std::unique_ptr<PlanStore>> PlanStore::open(const std::string& path, int64_t max_bytes) {
  auto impl = std::make_unique<Impl>();
  impl->max_bytes = std::max<int64_t>(max_bytes, 0);
  if (sqlite3_open_v2(path.c_str(), &impl->db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                      nullptr) != SQLITE_OK) {
    Status s = make_error(ErrorCode::BackendError, "plan cache: cannot open '", path,
                          "': ", impl->db ? sqlite3_errmsg(impl->db) : "out of memory");
    return s;
  }
  sqlite3_busy_timeout(impl->db, 10000);
  // WAL lets readers and one writer proceed together. Switching to it, and creating the table,
  // needs a moment alone; SQLite does not always call the busy handler for that (several
  // processes opening a new file at once), so a busy answer is retried here for as long.
  static constexpr const char* setup[] = {
      "PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL",
      "CREATE TABLE IF NOT EXISTS plans (key TEXT PRIMARY KEY, engine_config TEXT NOT NULL, "
      "time_ms REAL NOT NULL, plan BLOB NOT NULL, checksum INTEGER NOT NULL, "
      "created INTEGER NOT NULL DEFAULT (strftime('%s','now')), "
      "used INTEGER NOT NULL DEFAULT 0)",
      // A file written before rows recorded their last use: the column is added (another
      // process adding it at the same moment makes this fail harmlessly, see below).
      "ALTER TABLE plans ADD COLUMN used INTEGER NOT NULL DEFAULT 0",
      // The running total of the rows' bytes (the bound's measure): triggers first, then the
      // row that holds it, set from the rows present (a row stored between the two is counted
      // by the sum, one stored after by its trigger). REPLACE fires the delete trigger only
      // with recursive triggers on.
      "PRAGMA recursive_triggers = ON",
      "CREATE TABLE IF NOT EXISTS plan_bytes (id INTEGER PRIMARY KEY, total INTEGER NOT NULL)",
      "CREATE TRIGGER IF NOT EXISTS plan_bytes_insert AFTER INSERT ON plans BEGIN "
      "UPDATE plan_bytes SET total = total + " PLAN_ROW_BYTES_OF("NEW.") " WHERE id = 0; END",
      "CREATE TRIGGER IF NOT EXISTS plan_bytes_delete AFTER DELETE ON plans BEGIN "
      "UPDATE plan_bytes SET total = total - " PLAN_ROW_BYTES_OF("OLD.") " WHERE id = 0; END",
      "CREATE TRIGGER IF NOT EXISTS plan_bytes_update AFTER UPDATE OF key, engine_config, plan "
      "ON plans BEGIN UPDATE plan_bytes SET total = total - " PLAN_ROW_BYTES_OF(
          "OLD.") " + " PLAN_ROW_BYTES_OF("NEW.") " WHERE id = 0; END",
      "INSERT OR IGNORE INTO plan_bytes (id, total) SELECT 0, " PLAN_ROW_BYTES("") " FROM plans"};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (const char* sql : setup) {
    for (;;) {
      int rc = SQLITE_OK;
      Status s = impl->exec(sql, &rc);
      if (s) break;
      if (std::string_view(sql).starts_with("ALTER") &&
          s.message().find("duplicate column") != std::string::npos)
        break;  // the table has it already
      const bool busy = rc == SQLITE_BUSY || rc == SQLITE_LOCKED;
      if (busy && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        continue;
      }
      if (busy)  // held by other processes for the whole timeout: the file itself is fine
        return make_error(ErrorCode::BackendError, "plan cache: '", path,
                          "' stayed locked by other processes for 10 s (", s.message(), ")");
      return make_error(ErrorCode::InvalidArgument, "plan cache: '", path,
                        "' is not a usable plan cache (", s.message(),
                        "); delete it and it will be created again");
    }
  }
  return std::unique_ptr<PlanStore>(new PlanStore(path, std::move(impl)));
}

Result<std::optional<PlanCacheEntry>> PlanStore::get(const std::string& key, std::string* warning) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  Stmt st;
  DNNGRAPH_TRY(impl_->prepare(
      st, "SELECT engine_config, time_ms, plan, checksum FROM plans WHERE key = ?1"));
  sqlite3_bind_text(st.s, 1, key.data(), static_cast<int>(key.size()), SQLITE_TRANSIENT);
  const int rc = sqlite3_step(st.s);
  if (rc == SQLITE_DONE) return std::optional<PlanCacheEntry>{};
  if (rc != SQLITE_ROW) return impl_->error("reading a plan");
  PlanCacheEntry e;
  bool typed = sqlite3_column_type(st.s, 0) == SQLITE_TEXT &&
               sqlite3_column_type(st.s, 2) == SQLITE_BLOB &&
               sqlite3_column_type(st.s, 3) == SQLITE_INTEGER;
  if (typed) {
    const auto* cfg = reinterpret_cast<const char*>(sqlite3_column_text(st.s, 0));
    e.engine_config.assign(cfg ? cfg : "", static_cast<size_t>(sqlite3_column_bytes(st.s, 0)));
    e.time_ms = sqlite3_column_double(st.s, 1);
    const auto* blob = static_cast<const char*>(sqlite3_column_blob(st.s, 2));
    e.plan.assign(blob ? blob : "", static_cast<size_t>(sqlite3_column_bytes(st.s, 2)));
  }
  const bool ok = typed && sqlite3_column_int64(st.s, 3) == checksum(e);
  sqlite3_reset(st.s);
  if (ok) {
    if (impl_->max_bytes > 0) {  // its last use, for the bound; failing that costs nothing here
      Stmt touch;
      if (impl_->prepare(touch, "UPDATE plans SET used = ?2 WHERE key = ?1")) {
        sqlite3_bind_text(touch.s, 1, key.data(), static_cast<int>(key.size()), SQLITE_TRANSIENT);
        sqlite3_bind_int64(touch.s, 2, now_us());
        (void)sqlite3_step(touch.s);
      }
    }
    return std::optional<PlanCacheEntry>(std::move(e));
  }
  if (warning)
    *warning = "plan cache: the row for this graph in '" + path_ +
               "' is corrupt (checksum mismatch); it was dropped and the graph is built again";
  DNNGRAPH_TRY(impl_->erase(key, "dropping a corrupt row"));
  return std::optional<PlanCacheEntry>{};
}

Status PlanStore::put(const std::string& key, const PlanCacheEntry& e) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  Stmt st;
  DNNGRAPH_TRY(impl_->prepare(st,
                              "INSERT OR REPLACE INTO plans (key, engine_config, time_ms, plan, "
                              "checksum, used) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"));
  sqlite3_bind_text(st.s, 1, key.data(), static_cast<int>(key.size()), SQLITE_TRANSIENT);
  sqlite3_bind_text(st.s, 2, e.engine_config.data(), static_cast<int>(e.engine_config.size()),
                    SQLITE_TRANSIENT);
  sqlite3_bind_double(st.s, 3, e.time_ms);
  sqlite3_bind_blob(st.s, 4, e.plan.data(), static_cast<int>(e.plan.size()), SQLITE_TRANSIENT);
  sqlite3_bind_int64(st.s, 5, checksum(e));
  sqlite3_bind_int64(st.s, 6, now_us());
  if (sqlite3_step(st.s) != SQLITE_DONE) return impl_->error("storing a plan");
  return impl_->max_bytes > 0 ? impl_->trim(key) : Status::ok();
}

Status PlanStore::erase(const std::string& key) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->erase(key, "dropping a plan");
}

Result<int64_t> PlanStore::size() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  Stmt st;
  DNNGRAPH_TRY(impl_->prepare(st, "SELECT COUNT(*) FROM plans"));
  if (sqlite3_step(st.s) != SQLITE_ROW) return impl_->error("counting plans");
  return static_cast<int64_t>(sqlite3_column_int64(st.s, 0));
}

Result<int64_t> PlanStore::bytes() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->bytes();
}

#else  // built without SQLite: the disk half of the cache is unavailable

struct PlanStore::Impl {};
Result<std::unique_ptr<PlanStore>> PlanStore::open(const std::string& path, int64_t) {
  return make_error(ErrorCode::NotSupported, "plan cache: '", path,
                    "' cannot be used: dnngraph was built without SQLite (libsqlite3-dev)");
}
Result<std::optional<PlanCacheEntry>> PlanStore::get(const std::string&, std::string*) {
  return std::optional<PlanCacheEntry>{};
}
Status PlanStore::put(const std::string&, const PlanCacheEntry&) { return Status::ok(); }
Status PlanStore::erase(const std::string&) { return Status::ok(); }
Result<int64_t> PlanStore::size() { return int64_t{0}; }
Result<int64_t> PlanStore::bytes() { return int64_t{0}; }

#endif

PlanStore::PlanStore(std::string path, std::unique_ptr<Impl> impl)
    : path_(std::move(path)), impl_(std::move(impl)) {}
PlanStore::~PlanStore() = default;

}  // namespace dnngraph
