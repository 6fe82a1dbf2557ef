#include "core/store/group_index.h"

#include "core/store/group_file.h"
#include "core/base/sha256.h"
#include "core/base/timings.h"

#include <sqlite3.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>

namespace fs = std::filesystem;

namespace cc {

namespace {

// Bump when the table layout changes: an index with another user_version is moved aside and rebuilt
// from the group files (it is only a cache, so there is nothing to migrate).
constexpr int kIndexSchemaVersion = 1;
// Long enough to ride out another process's rebuild transaction; short enough to report a stuck one.
constexpr int kBusyTimeoutMs = 10000;

// Thrown while opening when the file is not a usable index of this schema; the constructor moves it
// aside and starts afresh. Any other error (permissions, disk, busy) is a real failure and propagates.
struct DamagedIndex : std::runtime_error {
    using std::runtime_error::runtime_error;
};

bool is_damage_code(int rc) {
    const int primary = rc & 0xff;
    return primary == SQLITE_NOTADB || primary == SQLITE_CORRUPT;
}

// prefix_ids are stored as little-endian int32 whatever the host order, so the file is portable.
std::string encode_ids(const std::vector<token_id>& ids) {
    std::string out(ids.size() * 4, '\0');
    for (size_t i = 0; i < ids.size(); ++i) {
        const auto v = static_cast<uint32_t>(ids[i]);
        for (int b = 0; b < 4; ++b) out[i * 4 + b] = static_cast<char>((v >> (8 * b)) & 0xff);
    }
    return out;
}

std::vector<token_id> decode_ids(const unsigned char* bytes, size_t n_bytes) {
    std::vector<token_id> ids(n_bytes / 4);
    for (size_t i = 0; i < ids.size(); ++i) {
        uint32_t v = 0;
        for (int b = 0; b < 4; ++b) v |= static_cast<uint32_t>(bytes[i * 4 + b]) << (8 * b);
        ids[i] = static_cast<token_id>(v);
    }
    return ids;
}

// An exclusive advisory lock on index.sqlite.lock, held only while a process opens, checks and (when
// damaged) replaces the index: without it two processes could both find a damaged file and the second
// would move aside the fresh index the first had just built. A separate file, because SQLite's own
// POSIX locks on index.sqlite must not be disturbed by another descriptor on it, and a lock held
// elsewhere on the cache directory's `lock` would make this one wait on itself.
class OpenLock {
public:
    explicit OpenLock(const fs::path& path) {
        fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (fd_ < 0) throw std::runtime_error(path.string() + ": cannot open lock file: " + std::strerror(errno));
        while (::flock(fd_, LOCK_EX) != 0) {
            if (errno == EINTR) continue;
            const int err = errno;
            ::close(fd_);
            throw std::runtime_error(path.string() + ": cannot lock: " + std::strerror(err));
        }
    }
    ~OpenLock() { ::close(fd_); }  // closing the descriptor releases the lock
    OpenLock(const OpenLock&) = delete;
    OpenLock& operator=(const OpenLock&) = delete;

private:
    int fd_ = -1;
};

// One SQLite connection with its cached prepared statements; errors become
// std::runtime_error "<path>: <sqlite message> (<what was being done>)".
struct Connection {
    fs::path db_path;
    sqlite3* db = nullptr;
    std::map<std::string, sqlite3_stmt*> statements;  // by SQL text

    Connection() = default;
    ~Connection() { close(); }
    Connection(const Connection&) = delete;
    Connection& operator=(const Connection&) = delete;

    void close() {
        for (auto& [sql, stmt] : statements) sqlite3_finalize(stmt);
        statements.clear();
        if (db) sqlite3_close_v2(db);
        db = nullptr;
    }

    [[noreturn]] void fail(int rc, const std::string& doing) const {
        const std::string message = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
        throw std::runtime_error(db_path.string() + ": " + message + " (" + doing + ")");
    }

    void check(int rc, const std::string& doing) const {
        if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW) fail(rc, doing);
    }

    void exec(const char* sql, const std::string& doing) {
        char* err = nullptr;
        const int rc = sqlite3_exec(db, sql, nullptr, nullptr, &err);
        if (rc != SQLITE_OK) {
            const std::string message = err ? err : sqlite3_errstr(rc);
            sqlite3_free(err);
            throw std::runtime_error(db_path.string() + ": " + message + " (" + doing + ")");
        }
    }

    // A cached prepared statement; the caller wraps it in a Query, which resets it when done.
    sqlite3_stmt* statement(const char* sql) {
        auto it = statements.find(sql);
        if (it != statements.end()) return it->second;
        sqlite3_stmt* stmt = nullptr;
        const int rc = sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
        if (rc != SQLITE_OK) fail(rc, std::string("preparing ") + sql);
        statements.emplace(sql, stmt);
        return stmt;
    }
};

}  // namespace

struct GroupIndex::Impl : Connection {
    fs::path cache_dir;
    bool rebuilt = false;
    std::vector<std::string> open_report;  // what opening found and did, one line each
    // One connection per GroupIndex, shared by the caller's threads: statements are reused, so calls
    // are serialised here (SQLite serialises processes itself).
    mutable std::mutex mutex;

    void open_checked(bool* created_schema);
    fs::path move_aside();
    void create_schema();
    // In one write transaction: clears the table (replace_all), deletes `remove_keys`, then inserts or
    // updates `entries` (metadata only for existing keys: hits and last_used stay).
    void write(const std::vector<std::string>& remove_keys, const std::vector<IndexEntry>& entries, bool replace_all,
               const std::string& doing);
    std::vector<IndexEntry> select(const char* sql, const std::string& doing, const std::vector<std::string>& args);
};

namespace {

// One use of a cached statement: binds, steps, and resets it on every exit path so the next use
// starts clean and no read transaction is left open.
class Query {
public:
    Query(Connection& impl, const char* sql, std::string doing)
        : impl_(impl), stmt_(impl.statement(sql)), doing_(std::move(doing)) {}
    ~Query() {
        sqlite3_reset(stmt_);
        sqlite3_clear_bindings(stmt_);
    }
    Query(const Query&) = delete;
    Query& operator=(const Query&) = delete;

    Query& bind(int i, const std::string& s) {
        impl_.check(sqlite3_bind_text(stmt_, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT), doing_);
        return *this;
    }
    Query& bind_blob(int i, const std::string& bytes) {
        impl_.check(sqlite3_bind_blob(stmt_, i, bytes.data(), static_cast<int>(bytes.size()), SQLITE_TRANSIENT),
                    doing_);
        return *this;
    }
    Query& bind(int i, int64_t v) {
        impl_.check(sqlite3_bind_int64(stmt_, i, v), doing_);
        return *this;
    }
    // True while there is a row to read.
    bool step() {
        const int rc = sqlite3_step(stmt_);
        if (rc == SQLITE_ROW) return true;
        if (rc == SQLITE_DONE) return false;
        impl_.fail(rc, doing_);
    }
    void run() {
        while (step()) {
        }
    }
    std::string text(int col) const {
        const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, col));
        return p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(stmt_, col))) : std::string();
    }
    int64_t int64(int col) const { return sqlite3_column_int64(stmt_, col); }
    std::vector<token_id> ids(int col) const {
        const auto* p = static_cast<const unsigned char*>(sqlite3_column_blob(stmt_, col));
        const auto n = static_cast<size_t>(sqlite3_column_bytes(stmt_, col));
        if (n % 4 != 0)
            throw std::runtime_error(impl_.db_path.string() + ": prefix_ids blob of " + std::to_string(n) +
                                     " bytes is not a whole number of int32 (" + doing_ + ")");
        return p ? decode_ids(p, n) : std::vector<token_id>();
    }
    const std::string& doing() const { return doing_; }

private:
    Connection& impl_;
    sqlite3_stmt* stmt_;
    std::string doing_;
};

// BEGIN IMMEDIATE takes the write lock up front (waiting on the busy timeout): a deferred transaction
// that reads first and then writes can fail with SQLITE_BUSY at the upgrade without waiting.
class WriteTransaction {
public:
    WriteTransaction(Connection& impl, std::string doing) : impl_(impl), doing_(std::move(doing)) {
        impl_.exec("BEGIN IMMEDIATE", doing_);
    }
    ~WriteTransaction() {
        if (!committed_) sqlite3_exec(impl_.db, "ROLLBACK", nullptr, nullptr, nullptr);
    }
    WriteTransaction(const WriteTransaction&) = delete;
    WriteTransaction& operator=(const WriteTransaction&) = delete;
    void commit() {
        impl_.exec("COMMIT", doing_);
        committed_ = true;
    }

private:
    Connection& impl_;
    std::string doing_;
    bool committed_ = false;
};

// Every column but n_tokens (the length of prefix_ids, kept for ORDER BY).
constexpr const char* kColumns =
    "group_key, tools_hash, tool_names, model_fingerprint, chat_format, backend_numerics, prefix_ids, "
    "kv_bytes, file_bytes, created_unix_ms, last_used_unix_ms, hits";

IndexEntry read_entry(const Query& q) {
    IndexEntry e;
    e.group_key = q.text(0);
    e.tools_hash = q.text(1);
    try {
        e.tool_names = nlohmann::json::parse(q.text(2)).get<std::vector<std::string>>();
    } catch (const nlohmann::json::exception& ex) {
        throw std::runtime_error("tool_names of " + e.group_key + " is not a JSON array of strings: " + ex.what());
    }
    e.model_fingerprint = q.text(3);
    e.chat_format = q.text(4);
    e.backend_numerics = q.text(5);
    e.prefix_ids = q.ids(6);
    e.kv_bytes = static_cast<uint64_t>(q.int64(7));
    e.file_bytes = static_cast<uint64_t>(q.int64(8));
    e.created_unix_ms = q.int64(9);
    e.last_used_unix_ms = q.int64(10);
    e.hits = static_cast<uint64_t>(q.int64(11));
    return e;
}

// The group files under groups/, keyed by file name stem; names that cannot be group files of ours
// (temp files start with '.', the quarantine/ folder, other extensions) are not looked at.
struct GroupFiles {
    std::map<std::string, fs::path> by_key;
    std::vector<std::string> problems;
};

GroupFiles scan_group_files(const fs::path& cache_dir) {
    GroupFiles out;
    const fs::path dir = cache_dir / "groups";
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) return out;
    fs::directory_iterator it(dir, ec);
    if (ec) {
        out.problems.push_back(dir.string() + ": cannot list: " + ec.message());
        return out;
    }
    for (const fs::directory_entry& entry : it) {
        const fs::path& p = entry.path();
        const std::string name = p.filename().string();
        if (name.empty() || name[0] == '.' || p.extension() != ".kv") continue;
        std::error_code type_ec;
        if (!entry.is_regular_file(type_ec)) continue;
        const std::string stem = p.stem().string();
        if (!is_group_key(stem)) {
            out.problems.push_back(p.string() + ": file name is not a group key (64 lowercase hex digits)");
            continue;
        }
        out.by_key.emplace(stem, p);
    }
    return out;
}

bool has_group_files(const fs::path& cache_dir) {
    const GroupFiles files = scan_group_files(cache_dir);
    return !files.by_key.empty();
}

}  // namespace

IndexEntry index_entry_from_header(const GroupMeta& h, uint64_t file_bytes) {
    IndexEntry e;
    static_cast<GroupSummary&>(e) = h;
    e.kv_bytes = group_payload_bytes(h);
    e.file_bytes = file_bytes;
    // Usage history lives only in the index; a re-read group starts as if just created.
    e.last_used_unix_ms = h.created_unix_ms;
    e.hits = 0;
    return e;
}

namespace {

// The index entry for one group file, from its header; a problem line instead when it cannot be used.
std::optional<IndexEntry> entry_from_file(const std::string& key, const fs::path& path,
                                          std::vector<std::string>& problems) {
    try {
        const GroupMeta h = read_group_header(path);
        if (h.group_key != key) {
            problems.push_back(path.string() + ": header group_key " + h.group_key + " does not match the file name");
            return std::nullopt;
        }
        return index_entry_from_header(h, fs::file_size(path));
    } catch (const std::exception& ex) {
        // read_group_header names the file itself; other failures (file_size, dtype) may not.
        std::string what = ex.what();
        if (what.find(path.string()) == std::string::npos) what = path.string() + ": " + what;
        problems.push_back(what);
        return std::nullopt;
    }
}

}  // namespace

void GroupIndex::Impl::create_schema() {
    WriteTransaction tx(*this, "creating the schema");
    // Checked again under the write lock, in case the version changed since it was read.
    int version = 0;
    {
        Query q(*this, "PRAGMA user_version", "reading the schema version");
        if (q.step()) version = static_cast<int>(q.int64(0));
    }
    if (version == kIndexSchemaVersion) return;
    if (version != 0) throw DamagedIndex("schema version " + std::to_string(version));
    exec(
        "CREATE TABLE IF NOT EXISTS groups ("
        " group_key TEXT PRIMARY KEY,"
        " tools_hash TEXT NOT NULL,"
        " tool_names TEXT NOT NULL,"  // JSON array, canonical order
        " model_fingerprint TEXT NOT NULL,"
        " chat_format TEXT NOT NULL,"
        " backend_numerics TEXT NOT NULL,"
        " n_tokens INTEGER NOT NULL,"
        " prefix_ids BLOB NOT NULL,"  // little-endian int32 per token
        " kv_bytes INTEGER NOT NULL,"
        " file_bytes INTEGER NOT NULL,"
        " created_unix_ms INTEGER NOT NULL,"
        " last_used_unix_ms INTEGER NOT NULL,"
        " hits INTEGER NOT NULL DEFAULT 0)",
        "creating table groups");
    exec("CREATE INDEX IF NOT EXISTS groups_by_model ON groups(model_fingerprint, chat_format, backend_numerics)",
         "creating index groups_by_model");
    exec(("PRAGMA user_version = " + std::to_string(kIndexSchemaVersion)).c_str(), "setting the schema version");
    tx.commit();
}

// Opens the database and checks that it is a sound index of this schema, creating the schema in an
// empty file. Throws DamagedIndex when the file must be replaced.
void GroupIndex::Impl::open_checked(bool* created_schema) {
    *created_schema = false;
    int rc = sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                             nullptr);
    if (rc != SQLITE_OK) fail(rc, "opening");
    sqlite3_extended_result_codes(db, 1);
    check(sqlite3_busy_timeout(db, kBusyTimeoutMs), "setting the busy timeout");

    // SQLite reads the file lazily: a file that is not a database shows up at the first statement.
    auto damage_checked = [&](const char* sql, const std::string& doing) {
        std::vector<std::string> rows;
        sqlite3_stmt* stmt = nullptr;
        rc = sqlite3_prepare_v2(db, sql, -1, &stmt, nullptr);
        if (rc == SQLITE_OK)
            while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
                const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
                rows.emplace_back(p ? p : "");
            }
        sqlite3_finalize(stmt);
        if (rc != SQLITE_DONE) {
            if (is_damage_code(rc)) throw DamagedIndex(std::string(sqlite3_errstr(rc)) + " (" + doing + ")");
            fail(rc, doing);
        }
        return rows;
    };

    const auto mode = damage_checked("PRAGMA journal_mode = WAL", "switching to WAL");
    if (mode.empty() || mode[0] != "wal")
        throw std::runtime_error(db_path.string() + ": journal mode is " + (mode.empty() ? "?" : mode[0]) +
                                 ", not wal (switching to WAL)");
    // In WAL mode NORMAL cannot corrupt the database; a power cut may lose the last few counter
    // updates, which is fine for a cache and saves an fsync per touch.
    damage_checked("PRAGMA synchronous = NORMAL", "setting synchronous");
    const auto quick = damage_checked("PRAGMA quick_check", "checking");
    if (quick.size() != 1 || quick[0] != "ok") throw DamagedIndex("quick_check: " + (quick.empty() ? "?" : quick[0]));

    const auto version = damage_checked("PRAGMA user_version", "reading the schema version");
    const int v = version.empty() ? 0 : std::stoi(version[0]);
    if (v == 0) {
        const auto tables = damage_checked("SELECT name FROM sqlite_schema", "listing tables");
        if (!tables.empty()) throw DamagedIndex("tables without a schema version");
        create_schema();
        *created_schema = true;
    } else if (v != kIndexSchemaVersion) {
        throw DamagedIndex("schema version " + std::to_string(v) + ", expected " + std::to_string(kIndexSchemaVersion));
    }
    const auto table = damage_checked("SELECT name FROM sqlite_schema WHERE type = 'table' AND name = 'groups'",
                                      "looking for table groups");
    if (table.empty()) throw DamagedIndex("no table groups");
}

// Moves index.sqlite and its -wal/-shm aside as index.sqlite.damaged-<unix ms>[-wal|-shm], kept for
// inspection. Called with the connection closed and the open lock held.
fs::path GroupIndex::Impl::move_aside() {
    fs::path aside;
    for (int i = 0;; ++i) {
        aside = db_path;
        aside += ".damaged-" + std::to_string(unix_ms_now()) + (i ? "." + std::to_string(i) : "");
        if (!fs::exists(aside)) break;
    }
    for (const char* suffix : {"", "-wal", "-shm"}) {
        fs::path from = db_path;
        from += suffix;
        fs::path to = aside;
        to += suffix;
        std::error_code ec;
        if (!fs::exists(from, ec)) continue;
        fs::rename(from, to, ec);
        if (ec)
            throw std::runtime_error(from.string() + ": cannot move the damaged index aside to " + to.string() + ": " +
                                     ec.message());
    }
    return aside;
}

GroupIndex::GroupIndex(const fs::path& cache_dir) : impl_(std::make_unique<Impl>()) {
    impl_->cache_dir = cache_dir;
    impl_->db_path = cache_dir / "index.sqlite";
    std::error_code ec;
    fs::create_directories(cache_dir, ec);
    if (ec) throw std::runtime_error(cache_dir.string() + ": cannot create the cache directory: " + ec.message());

    fs::path lock_path = impl_->db_path;
    lock_path += ".lock";
    OpenLock lock(lock_path);

    bool need_rebuild = false;
    bool created_schema = false;
    try {
        impl_->open_checked(&created_schema);
        // A new index beside existing group files: the old one was deleted, so fill it from them.
        need_rebuild = created_schema && has_group_files(cache_dir);
    } catch (const DamagedIndex& damage) {
        impl_->close();
        const fs::path aside = impl_->move_aside();
        impl_->open_report.push_back(impl_->db_path.string() + ": " + damage.what() + "; moved aside to " +
                                     aside.filename().string());
        try {
            impl_->open_checked(&created_schema);
        } catch (const DamagedIndex& ex) {  // a fresh file cannot be damaged: something else is wrong
            throw std::runtime_error(impl_->db_path.string() + ": new index is unusable: " + ex.what());
        }
        need_rebuild = true;
    }
    if (need_rebuild) {
        // Bad group files are not fatal here: they stay where they are and are reported.
        for (std::string& problem : rebuild()) impl_->open_report.push_back(std::move(problem));
        impl_->rebuilt = true;
    }
}

GroupIndex::~GroupIndex() = default;

void GroupIndex::Impl::write(const std::vector<std::string>& remove_keys, const std::vector<IndexEntry>& entries,
                             bool replace_all, const std::string& doing) {
    WriteTransaction tx(*this, doing);
    if (replace_all) Query(*this, "DELETE FROM groups", doing + ": clearing").run();
    for (const std::string& key : remove_keys)
        Query(*this, "DELETE FROM groups WHERE group_key = ?1", doing + ": removing " + key).bind(1, key).run();
    for (const IndexEntry& e : entries) {
        Query q(*this,
                "INSERT INTO groups (group_key, tools_hash, tool_names, model_fingerprint, chat_format, "
                "backend_numerics, n_tokens, prefix_ids, kv_bytes, file_bytes, created_unix_ms, last_used_unix_ms, "
                "hits) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13) "
                "ON CONFLICT(group_key) DO UPDATE SET tools_hash = excluded.tools_hash, "
                "tool_names = excluded.tool_names, model_fingerprint = excluded.model_fingerprint, "
                "chat_format = excluded.chat_format, backend_numerics = excluded.backend_numerics, "
                "n_tokens = excluded.n_tokens, prefix_ids = excluded.prefix_ids, kv_bytes = excluded.kv_bytes, "
                "file_bytes = excluded.file_bytes, created_unix_ms = excluded.created_unix_ms",
                doing + ": writing " + e.group_key);
        q.bind(1, e.group_key)
            .bind(2, e.tools_hash)
            .bind(3, nlohmann::json(e.tool_names).dump())
            .bind(4, e.model_fingerprint)
            .bind(5, e.chat_format)
            .bind(6, e.backend_numerics)
            .bind(7, static_cast<int64_t>(e.n_tokens()))
            .bind_blob(8, encode_ids(e.prefix_ids))
            .bind(9, static_cast<int64_t>(e.kv_bytes))
            .bind(10, static_cast<int64_t>(e.file_bytes))
            .bind(11, e.created_unix_ms)
            .bind(12, e.last_used_unix_ms ? e.last_used_unix_ms : e.created_unix_ms)
            .bind(13, static_cast<int64_t>(e.hits));
        q.run();
    }
    tx.commit();
}

std::vector<IndexEntry> GroupIndex::Impl::select(const char* sql, const std::string& doing,
                                                 const std::vector<std::string>& args) {
    Query q(*this, sql, doing);
    for (size_t i = 0; i < args.size(); ++i) q.bind(static_cast<int>(i + 1), args[i]);
    std::vector<IndexEntry> out;
    while (q.step()) {
        try {
            out.push_back(read_entry(q));
        } catch (const std::runtime_error& ex) {
            throw std::runtime_error(db_path.string() + ": " + ex.what() + " (" + doing + ")");
        }
    }
    return out;
}

void GroupIndex::upsert(const IndexEntry& entry) {
    std::lock_guard guard(impl_->mutex);
    impl_->write({}, {entry}, false, "upserting " + entry.group_key);
}

bool GroupIndex::touch(const std::string& group_key) {
    std::lock_guard guard(impl_->mutex);
    // Later than every other entry's last use, even within one millisecond (a disk hit right after
    // another group's write) or after the clock stepped back: the LRU order is the order of uses.
    Query q(*impl_,
            "UPDATE groups SET hits = hits + 1, last_used_unix_ms = "
            "max(?1, (SELECT coalesce(max(last_used_unix_ms), 0) + 1 FROM groups)) WHERE group_key = ?2",
            "touching " + group_key);
    q.bind(1, unix_ms_now()).bind(2, group_key).run();
    return sqlite3_changes(impl_->db) > 0;
}

std::optional<IndexEntry> GroupIndex::get(const std::string& group_key) const {
    std::lock_guard guard(impl_->mutex);
    static const std::string sql = std::string("SELECT ") + kColumns + " FROM groups WHERE group_key = ?1";
    auto rows = impl_->select(sql.c_str(), "reading " + group_key, {group_key});
    if (rows.empty()) return std::nullopt;
    return std::move(rows.front());
}

std::vector<IndexEntry> GroupIndex::list() const {
    std::lock_guard guard(impl_->mutex);
    static const std::string sql =
        std::string("SELECT ") + kColumns + " FROM groups ORDER BY last_used_unix_ms DESC, group_key";
    return impl_->select(sql.c_str(), "listing", {});
}

std::vector<IndexEntry> GroupIndex::candidates(const std::string& model_fingerprint, const std::string& chat_format,
                                               const std::string& backend_numerics) const {
    std::lock_guard guard(impl_->mutex);
    // Longest first: the first entry that shares the whole of its prefix is the best reuse.
    static const std::string sql = std::string("SELECT ") + kColumns +
                                   " FROM groups WHERE model_fingerprint = ?1 AND chat_format = ?2 AND "
                                   "backend_numerics = ?3 ORDER BY n_tokens DESC, group_key";
    return impl_->select(sql.c_str(), "listing candidates", {model_fingerprint, chat_format, backend_numerics});
}

void GroupIndex::remove(const std::string& group_key) {
    std::lock_guard guard(impl_->mutex);
    Query(*impl_, "DELETE FROM groups WHERE group_key = ?1", "removing " + group_key).bind(1, group_key).run();
}

void GroupIndex::clear() {
    std::lock_guard guard(impl_->mutex);
    Query(*impl_, "DELETE FROM groups", "clearing").run();
}

std::vector<std::string> GroupIndex::rebuild() {
    // Headers are read before the write transaction, so other processes are not held up by file I/O.
    GroupFiles files = scan_group_files(impl_->cache_dir);
    std::vector<std::string> problems = std::move(files.problems);
    std::vector<IndexEntry> entries;
    for (const auto& [key, path] : files.by_key)
        if (auto e = entry_from_file(key, path, problems)) entries.push_back(std::move(*e));
    std::lock_guard guard(impl_->mutex);
    impl_->write({}, entries, true, "rebuilding");
    return problems;
}

std::vector<std::string> GroupIndex::reconcile() {
    GroupFiles files = scan_group_files(impl_->cache_dir);
    std::vector<std::string> problems = std::move(files.problems);

    std::map<std::string, int64_t> indexed;  // group_key -> file_bytes
    {
        std::lock_guard guard(impl_->mutex);
        Query q(*impl_, "SELECT group_key, file_bytes FROM groups", "reconciling: listing");
        while (q.step()) indexed.emplace(q.text(0), q.int64(1));
    }

    std::vector<std::string> gone;
    for (const auto& [key, bytes] : indexed) {
        auto it = files.by_key.find(key);
        if (it == files.by_key.end()) {
            gone.push_back(key);
            continue;
        }
        // Group files are immutable, so a size change means the file was replaced: read it again.
        std::error_code ec;
        const auto size = fs::file_size(it->second, ec);
        if (!ec && static_cast<int64_t>(size) == bytes) files.by_key.erase(it);
    }
    std::vector<IndexEntry> added;
    for (const auto& [key, path] : files.by_key) {
        if (auto e = entry_from_file(key, path, problems))
            added.push_back(std::move(*e));
        else if (indexed.count(key))
            gone.push_back(key);  // its file no longer reads: the entry would only mislead lookups
    }

    std::lock_guard guard(impl_->mutex);
    // Same statement as upsert: counters a concurrent process gave these keys meanwhile are kept.
    impl_->write(gone, added, false, "reconciling");
    return problems;
}

uint64_t GroupIndex::total_file_bytes() const {
    std::lock_guard guard(impl_->mutex);
    Query q(*impl_, "SELECT COALESCE(SUM(file_bytes), 0) FROM groups", "summing file bytes");
    return q.step() ? static_cast<uint64_t>(q.int64(0)) : 0;
}

const fs::path& GroupIndex::path() const {
    return impl_->db_path;
}

bool GroupIndex::was_rebuilt() const {
    return impl_->rebuilt;
}

const std::vector<std::string>& GroupIndex::open_report() const {
    return impl_->open_report;
}

}  // namespace cc
