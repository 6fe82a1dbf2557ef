#include "core/store/remote_tier.h"

#include "core/base/timings.h"

#include <hiredis/hiredis.h>
#include <nlohmann/json.hpp>
#include <xxhash.h>
#if defined(__x86_64__) && __has_include(<xxh_x86dispatch.h>)
#include <xxh_x86dispatch.h>  // the runtime-dispatched (AVX2/AVX-512) XXH3, as group_file.cpp
#endif

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <random>
#include <stdexcept>
#include <thread>

namespace cc {
namespace {

using ordered_json = nlohmann::ordered_json;

constexpr const char* kManifestFormat = "contextcache-remote-group";
constexpr int kManifestVersion = 1;
// Bytes of GET replies in flight while fetching: enough that Redis always has the next reply ready
// while the socket drains the current one, few enough that neither side buffers a whole group
// (Redis copies each reply into the client's output buffer before sending it). Measured on
// loopback (bench_remote_tier, docs/deploy.md): 2-4 chunks of 1-4 MiB in flight are equally fast.
constexpr size_t kBytesInFlight = size_t(8) << 20;
// Requests in flight for chunks of `chunk_bytes` (publish bounds its SETs the same way).
size_t fetch_window(uint64_t chunk_bytes) {
    return std::clamp<uint64_t>(kBytesInFlight / std::max<uint64_t>(chunk_bytes, 1), 2, 16);
}
// A manifest is a few KB; a group file over this is not one this program wrote.
constexpr uint64_t kMaxRemoteFileBytes = uint64_t(256) << 30;
constexpr size_t kMaxManifestBytes = size_t(16) << 20;

// Compare-and-delete: removes KEYS[1] only while it still holds ARGV[1] (a lock this process took,
// a manifest this process read). One key, so it runs on Redis Cluster too.
constexpr const char* kDeleteIfEquals =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end";

struct ReplyDeleter {
    void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

std::string hex128(std::span<const std::byte> bytes) {
    const XXH128_hash_t h = XXH3_128bits(bytes.data(), bytes.size());
    char out[33];
    std::snprintf(out, sizeof out, "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                  static_cast<unsigned long long>(h.low64));
    return out;
}

bool is_hex(std::string_view s, size_t n) {
    return s.size() == n && std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

double gb_per_s(size_t bytes, double ms) { return ms > 0 ? double(bytes) / (ms * 1e6) : 0; }

// Throws with the context's error (connection lost, timeout) or the reply's (a Redis error).
Reply command_reply(redisContext* c, void* raw, const std::string& what) {
    Reply r(static_cast<redisReply*>(raw));
    if (!r) throw std::runtime_error(what + ": " + (c->err ? std::string(c->errstr) : std::string("no reply")));
    if (r->type == REDIS_REPLY_ERROR) throw std::runtime_error(what + ": " + std::string(r->str, r->len));
    return r;
}

Reply next_reply(redisContext* c, const std::string& what) {
    void* raw = nullptr;
    if (redisGetReply(c, &raw) != REDIS_OK) {
        if (raw) freeReplyObject(raw);
        throw std::runtime_error(what + ": " + (c->err ? std::string(c->errstr) : std::string("no reply")));
    }
    return command_reply(c, raw, what);
}

// Writes the commands queued with redisAppendCommand.
void flush_commands(redisContext* c, const std::string& where) {
    int done = 0;
    while (!done)
        if (redisBufferWrite(c, &done) != REDIS_OK)
            throw std::runtime_error(where + ": sending: " + (c->err ? std::string(c->errstr) : std::string("failed")));
}

// Reads GET replies straight from the connection's socket, each bulk string into the caller's
// buffer. Why not hiredis's reader: it reads 16 KiB at a time into a buffer that grows in 1 MiB
// steps past 1 MiB (a realloc and a copy each) and then copies the string once more into the reply
// object, and with replies pipelined it moves the unread tail down after each one: a 16 MiB chunk
// cost about 1,000 reads and several copies, and the tier loaded at ~0.5 GB/s on loopback where a
// socket read into place does several GB/s (bench/bench_remote_tier.cpp, docs/deploy.md).
// Only for a connection with no reply pending in hiredis's reader (checked); the socket is
// blocking with hiredis's SO_RCVTIMEO, so a silent server is a timeout, not a hang.
class BulkReader {
public:
    BulkReader(redisContext* c, std::string where) : c_(c), where_(std::move(where)) {
        if (c_->reader && c_->reader->len > c_->reader->pos)
            throw std::runtime_error(where_ + ": a reply is pending on the connection");
    }

    // The next reply's bulk length; nullopt for nil. An error reply or any other type throws.
    std::optional<size_t> bulk_length(const std::string& what) {
        size_t eol;
        while ((eol = pending_.find("\r\n", pos_)) == std::string::npos) {
            if (pending_.size() - pos_ > 64) throw std::runtime_error(where_ + ": " + what + ": not a Redis reply");
            fill(what);
        }
        const std::string line = pending_.substr(pos_, eol - pos_);
        pos_ = eol + 2;
        if (line.empty()) throw std::runtime_error(where_ + ": " + what + ": empty reply line");
        if (line[0] == '-') throw std::runtime_error(where_ + ": " + what + ": " + line.substr(1));
        if (line[0] != '$') throw std::runtime_error(where_ + ": " + what + ": not a string reply");
        if (line == "$-1") return std::nullopt;
        size_t n = 0;
        const auto [p, ec] = std::from_chars(line.data() + 1, line.data() + line.size(), n);
        if (ec != std::errc() || p != line.data() + line.size())
            throw std::runtime_error(where_ + ": " + what + ": bad length \"" + line + "\"");
        return n;
    }

    // The payload announced by bulk_length (dst.size() bytes) and its "\r\n".
    void read_payload(std::span<std::byte> dst, const std::string& what) {
        size_t got = std::min(dst.size(), pending_.size() - pos_);
        std::memcpy(dst.data(), pending_.data() + pos_, got);
        pos_ += got;
        while (got < dst.size()) got += receive(dst.data() + got, dst.size() - got, what);
        while (pending_.size() - pos_ < 2) fill(what);
        if (pending_.compare(pos_, 2, "\r\n") != 0) throw std::runtime_error(where_ + ": " + what + ": reply not terminated");
        pos_ += 2;
    }

    bool drained() const { return pos_ == pending_.size(); }

private:
    // Reply lines are read in small pieces: what follows a line is usually a chunk's bytes,
    // which go straight to their place.
    void fill(const std::string& what) {
        if (pos_ > 0) {
            pending_.erase(0, pos_);
            pos_ = 0;
        }
        char buf[64];
        const size_t n = receive(reinterpret_cast<std::byte*>(buf), sizeof buf, what);
        pending_.append(buf, n);
    }

    size_t receive(std::byte* dst, size_t n, const std::string& what) {
        for (;;) {
            const ssize_t r = ::recv(c_->fd, dst, n, 0);
            if (r > 0) return static_cast<size_t>(r);
            if (r == 0) throw std::runtime_error(where_ + ": " + what + ": connection closed by the server");
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) throw std::runtime_error(where_ + ": " + what + ": timed out");
            throw std::runtime_error(where_ + ": " + what + ": " + std::strerror(errno));
        }
    }

    redisContext* c_;
    std::string where_;
    std::string pending_;   // bytes read past a reply line, not yet consumed
    size_t pos_ = 0;        // consumed prefix of pending_
};

}  // namespace

RemoteManifest parse_remote_manifest(std::string_view text, std::string_view group_key, std::string_view key_prefix) {
    ordered_json j;
    try {
        j = ordered_json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        throw std::runtime_error(std::string("manifest is not JSON: ") + e.what());
    }
    try {
        if (!j.is_object() || j.value("format", "") != kManifestFormat)
            throw std::runtime_error("manifest format is not \"" + std::string(kManifestFormat) + "\"");
        // Sizes and the version must be JSON integers: nlohmann would cast a float (1e300, -1.5)
        // to the integer type, which is undefined behaviour past its range.
        auto unsigned_field = [](const ordered_json& o, const char* name) {
            const auto& v = o.at(name);
            if (!v.is_number_unsigned()) throw std::runtime_error(std::string("manifest field ") + name + " is not an unsigned integer");
            return v.get<uint64_t>();
        };
        if (!j.at("version").is_number_integer() || j.at("version").get<int64_t>() != kManifestVersion)
            throw std::runtime_error("manifest version " + j.at("version").dump() + ", expected " +
                                     std::to_string(kManifestVersion));
        if (j.at("group_key").get<std::string>() != group_key) throw std::runtime_error("manifest names another group_key");
        RemoteManifest m;
        m.file_bytes = unsigned_field(j, "file_bytes");
        m.file_xxh128 = j.at("file_xxh3_128").get<std::string>();
        if (m.file_bytes == 0 || m.file_bytes > kMaxRemoteFileBytes) throw std::runtime_error("file_bytes out of range");
        if (!is_hex(m.file_xxh128, 32)) throw std::runtime_error("file_xxh3_128 is not 32 hex digits");
        uint64_t total = 0;
        for (const auto& c : j.at("chunks")) {
            RemoteManifest::Chunk chunk;
            chunk.bytes = unsigned_field(c, "bytes");
            chunk.xxh128 = c.at("xxh3_128").get<std::string>();
            chunk.key = c.at("key").get<std::string>();
            if (!is_hex(chunk.xxh128, 32)) throw std::runtime_error("a chunk's xxh3_128 is not 32 hex digits");
            if (chunk.key != remote_chunk_key(key_prefix, chunk.xxh128)) throw std::runtime_error("a chunk's key is not its content's");
            if (chunk.bytes == 0 || chunk.bytes > m.file_bytes - total) throw std::runtime_error("chunk sizes do not add up");
            total += chunk.bytes;
            m.chunks.push_back(std::move(chunk));
        }
        if (total != m.file_bytes) throw std::runtime_error("chunk sizes do not add up to file_bytes");
        return m;
    } catch (const nlohmann::json::exception& e) {
        throw std::runtime_error(std::string("manifest field: ") + e.what());
    }
}

const char* remote_status_name(RemoteTier::Status status) {
    switch (status) {
        case RemoteTier::Status::hit: return "hit";
        case RemoteTier::Status::absent: return "absent";
        case RemoteTier::Status::incomplete: return "incomplete";
        case RemoteTier::Status::damaged: return "damaged";
        case RemoteTier::Status::unavailable: return "unavailable";
    }
    return "?";
}

RedisEndpoint parse_redis_url(std::string_view url) {
    const std::string whole(url);
    auto bad = [&](const std::string& why) { throw std::invalid_argument("remote \"" + whole + "\": " + why); };
    constexpr std::string_view scheme = "redis://";
    if (url.substr(0, scheme.size()) != scheme) bad("must start with redis:// (redis://host:port[/db])");
    url.remove_prefix(scheme.size());
    RedisEndpoint ep;
    if (const size_t at = url.rfind('@'); at != std::string_view::npos) {
        const std::string_view cred = url.substr(0, at);
        url.remove_prefix(at + 1);
        const size_t colon = cred.find(':');
        if (colon == std::string_view::npos) {
            ep.password = std::string(cred);
        } else {
            ep.user = std::string(cred.substr(0, colon));
            ep.password = std::string(cred.substr(colon + 1));
        }
    }
    std::string_view hostport = url;
    if (const size_t slash = url.find('/'); slash != std::string_view::npos) {
        hostport = url.substr(0, slash);
        const std::string_view db = url.substr(slash + 1);
        if (!db.empty()) {
            const auto [p, ec] = std::from_chars(db.data(), db.data() + db.size(), ep.db);
            if (ec != std::errc() || p != db.data() + db.size() || ep.db < 0) bad("database must be a number >= 0");
        }
    }
    if (const size_t colon = hostport.rfind(':'); colon != std::string_view::npos && hostport.find(']') == std::string_view::npos) {
        const std::string_view port = hostport.substr(colon + 1);
        const auto [p, ec] = std::from_chars(port.data(), port.data() + port.size(), ep.port);
        if (ec != std::errc() || p != port.data() + port.size() || ep.port < 1 || ep.port > 65535)
            bad("port must be 1..65535");
        hostport = hostport.substr(0, colon);
    }
    if (hostport.empty()) bad("no host");
    ep.host = std::string(hostport);
    return ep;
}

void RemoteTier::ConnDeleter::operator()(redisContext* c) const { redisFree(c); }

RemoteTier::RemoteTier(RemoteTierOptions options) : options_(std::move(options)), endpoint_(parse_redis_url(options_.url)) {
    if (options_.chunk_bytes == 0) throw std::invalid_argument("remote chunk size must be > 0");
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    std::random_device rd;
    owner_ = std::string(host) + ":" + std::to_string(::getpid()) + ":" + std::to_string(rd());
    if (options_.warm_bytes >= WarmPages::kPiece) {
        warm_ = std::make_shared<WarmPages>(options_.warm_bytes);
        warm_filler_ = std::thread([pool = warm_] { pool->fill(); });
    }
}

RemoteTier::~RemoteTier() {
    // Locks still held (a compile that never published) are released so others need not wait
    // for their expiry.
    std::vector<std::string> keys;
    {
        std::lock_guard lock(mutex_);
        for (const auto& [key, token] : held_locks_) keys.push_back(key);
    }
    for (const auto& key : keys) release_compile(key);
    if (warm_filler_.joinable()) {
        warm_->stop();
        warm_filler_.join();
    }
}

std::string RemoteTier::describe() const {
    return "redis://" + endpoint_.host + ":" + std::to_string(endpoint_.port) + "/" + std::to_string(endpoint_.db);
}

RemoteTier::ConnPtr RemoteTier::acquire() {
    for (;;) {
        Pooled p;
        {
            std::lock_guard lock(mutex_);
            if (pool_.empty()) break;
            p = std::move(pool_.back());
            pool_.pop_back();
        }
        // A connection idle for a while may have been closed under us (Redis restarted, a
        // timeout, a failover): check it once, so a restart costs a reconnect, not a miss.
        if (std::chrono::steady_clock::now() - p.released < std::chrono::seconds(1)) return std::move(p.conn);
        Reply pong(static_cast<redisReply*>(redisCommand(p.conn.get(), "PING")));
        if (pong && pong->type == REDIS_REPLY_STATUS && !p.conn->err) return std::move(p.conn);
    }
    const timeval tv{options_.io_timeout_ms / 1000, (options_.io_timeout_ms % 1000) * 1000};
    ConnPtr c(redisConnectWithTimeout(endpoint_.host.c_str(), endpoint_.port, tv));
    if (!c) throw std::runtime_error(describe() + ": cannot allocate a connection");
    if (c->err) throw std::runtime_error(describe() + ": " + c->errstr);
    redisSetTimeout(c.get(), tv);
    if (!endpoint_.password.empty()) {
        if (endpoint_.user.empty())
            command_reply(c.get(), redisCommand(c.get(), "AUTH %b", endpoint_.password.data(), endpoint_.password.size()),
                          describe() + ": AUTH");
        else
            command_reply(c.get(),
                          redisCommand(c.get(), "AUTH %b %b", endpoint_.user.data(), endpoint_.user.size(),
                                       endpoint_.password.data(), endpoint_.password.size()),
                          describe() + ": AUTH");
    }
    if (endpoint_.db != 0)
        command_reply(c.get(), redisCommand(c.get(), "SELECT %d", endpoint_.db), describe() + ": SELECT");
    return c;
}

void RemoteTier::release(ConnPtr conn) {
    if (!conn || conn->err) return;  // a failed connection is closed, never reused
    std::lock_guard lock(mutex_);
    if (pool_.size() < 8) pool_.push_back(Pooled{std::move(conn), std::chrono::steady_clock::now()});
}

RemoteTier::Fetch RemoteTier::fetch(const std::string& group_key) {
    Stopwatch clock;
    Fetch out;
    auto finish = [&](Status status, std::string problem) {
        out.status = status;
        out.problem = std::move(problem);
        out.load_ms = clock.elapsed_ms();
        switch (status) {
            case Status::hit:
                counters_.hits++;
                counters_.bytes_read += out.bytes.size();
                out.gb_s = gb_per_s(out.bytes.size(), out.load_ms);
                break;
            case Status::absent: counters_.misses++; break;
            case Status::incomplete: counters_.incomplete++; break;
            case Status::damaged: counters_.damaged++; break;
            case Status::unavailable: counters_.errors++; break;
        }
        if (status != Status::hit) out.bytes = Bytes();
        return std::move(out);
    };
    const std::string where = describe() + " group " + group_key.substr(0, 12);
    ConnPtr c;
    std::string manifest_text;
    RemoteManifest m;
    try {
        c = acquire();
        const std::string mkey = manifest_key(group_key);
        Reply r = command_reply(c.get(), redisCommand(c.get(), "GET %b", mkey.data(), mkey.size()), where + ": GET manifest");
        if (r->type == REDIS_REPLY_NIL) {
            release(std::move(c));
            return finish(Status::absent, "");
        }
        if (r->type != REDIS_REPLY_STRING || r->len > kMaxManifestBytes) {
            release(std::move(c));
            return finish(Status::damaged, where + ": the manifest is not a string of at most 16 MiB");
        }
        manifest_text.assign(r->str, r->len);
    } catch (const std::exception& e) {
        return finish(Status::unavailable, e.what());
    }

    // A manifest that does not parse is removed (if it is still the one read): the next compile
    // republishes the group.
    // (On a connection of its own: `c` may still have chunk replies coming.)
    auto forget_manifest = [&] {
        try {
            ConnPtr d = acquire();
            const std::string mkey = manifest_key(group_key);
            command_reply(d.get(),
                          redisCommand(d.get(), "EVAL %s 1 %b %b", kDeleteIfEquals, mkey.data(), mkey.size(),
                                       manifest_text.data(), manifest_text.size()),
                          where + ": delete manifest");
            release(std::move(d));
        } catch (const std::exception&) {
        }
    };
    try {
        m = parse_remote_manifest(manifest_text, group_key, options_.key_prefix);
    } catch (const std::exception& e) {
        forget_manifest();
        release(std::move(c));
        return finish(Status::damaged, where + ": " + e.what());
    }
    out.n_chunks = m.chunks.size();

    // Chunks, pipelined: a few GETs in flight (fetch_window), each chunk read straight from the
    // socket into its place in `out.bytes` and checked there. On any early return the connection
    // still has replies coming, so it is closed (not returned to the pool).
    try {
        out.bytes = Bytes(WarmAllocator<std::byte>(warm_));
        out.bytes.resize(m.file_bytes);
        BulkReader reader(c.get(), where);
        size_t sent = 0;
        auto send_next = [&] {
            const std::string& key = m.chunks[sent].key;
            if (redisAppendCommand(c.get(), "GET %b", key.data(), key.size()) != REDIS_OK)
                throw std::runtime_error(where + ": cannot queue a GET");
            ++sent;
        };
        const size_t window = fetch_window(m.chunks.front().bytes);
        while (sent < std::min(window, m.chunks.size())) send_next();
        flush_commands(c.get(), where);
        size_t offset = 0;
        for (size_t i = 0; i < m.chunks.size(); ++i) {
            const RemoteManifest::Chunk& chunk = m.chunks[i];
            const std::optional<size_t> len = reader.bulk_length("GET chunk " + std::to_string(i));
            if (!len) {
                forget_manifest();  // stale: the next compile republishes the group
                return finish(Status::incomplete, where + ": chunk " + std::to_string(i) + " of " +
                                                      std::to_string(m.chunks.size()) + " is missing (evicted or flushed)");
            }
            if (*len != chunk.bytes) {
                forget_manifest();
                return finish(Status::damaged, where + ": chunk " + std::to_string(i) + " is " + std::to_string(*len) +
                                                   " bytes, the manifest says " + std::to_string(chunk.bytes));
            }
            // The next GET goes out before this chunk is read, so Redis is already sending it.
            if (sent < m.chunks.size()) {
                send_next();
                flush_commands(c.get(), where);
            }
            const std::span<std::byte> got(out.bytes.data() + offset, chunk.bytes);
            reader.read_payload(got, "GET chunk " + std::to_string(i));
            const std::string sum = hex128(got);
            if (sum != chunk.xxh128) {
                forget_manifest();
                return finish(Status::damaged, where + ": chunk " + std::to_string(i) + " checksum mismatch (manifest " +
                                                   chunk.xxh128 + ", computed " + sum + ")");
            }
            offset += chunk.bytes;
        }
        if (!reader.drained()) return finish(Status::unavailable, where + ": bytes after the last reply");
    } catch (const std::bad_alloc&) {
        return finish(Status::unavailable, where + ": not enough memory for " + std::to_string(m.file_bytes) + " bytes");
    } catch (const std::exception& e) {
        return finish(Status::unavailable, e.what());
    }
    // Every byte is covered by exactly one chunk checksum and the sizes add up to file_bytes, so
    // the manifest's whole-file checksum would be a second pass over the same bytes: it is
    // written (for tools that read a group back whole) but not recomputed here.
    release(std::move(c));
    return finish(Status::hit, "");
}

void RemoteTier::publish(const std::string& group_key, std::span<const std::byte> file_bytes, const ManifestInfo& info) {
    const std::string where = describe() + " group " + group_key.substr(0, 12);
    try {
        ConnPtr c = acquire();
        ordered_json chunks = ordered_json::array();
        // Every chunk's SET is queued, then every reply read: one round trip's latency per group.
        size_t n_sent = 0;
        for (size_t offset = 0; offset < file_bytes.size(); offset += options_.chunk_bytes) {
            const auto chunk = file_bytes.subspan(offset, std::min(options_.chunk_bytes, file_bytes.size() - offset));
            const std::string sum = hex128(chunk);
            const std::string key = chunk_key(sum);
            if (redisAppendCommand(c.get(), "SET %b %b", key.data(), key.size(), chunk.data(), chunk.size()) != REDIS_OK)
                throw std::runtime_error(where + ": cannot queue a SET");
            ++n_sent;
            chunks.push_back(ordered_json{{"key", key}, {"bytes", chunk.size()}, {"xxh3_128", sum}});
            // Bound what waits in the socket buffers: read replies once a window is queued.
            while (n_sent > fetch_window(options_.chunk_bytes)) {
                next_reply(c.get(), where + ": SET chunk");
                --n_sent;
            }
        }
        while (n_sent > 0) {
            next_reply(c.get(), where + ": SET chunk");
            --n_sent;
        }
        // The manifest last: a reader that sees it finds every chunk (unless Redis evicted one
        // since, which reads as a miss).
        ordered_json m{{"format", kManifestFormat},
                       {"version", kManifestVersion},
                       {"group_key", group_key},
                       {"model_fingerprint", info.model_fingerprint},
                       {"n_tokens", info.n_tokens},
                       {"file_bytes", file_bytes.size()},
                       {"file_xxh3_128", hex128(file_bytes)},
                       {"chunk_bytes", options_.chunk_bytes},
                       {"created_unix_ms", unix_ms_now()},
                       {"publisher", owner_},
                       {"chunks", std::move(chunks)}};
        const std::string text = m.dump();
        const std::string mkey = manifest_key(group_key);
        command_reply(c.get(), redisCommand(c.get(), "SET %b %b", mkey.data(), mkey.size(), text.data(), text.size()),
                      where + ": SET manifest");
        release(std::move(c));
    } catch (const std::exception&) {
        counters_.publish_errors++;
        throw;
    }
    counters_.published++;
    counters_.bytes_written += file_bytes.size();
}

RemoteTier::Claim RemoteTier::claim_compile(const std::string& group_key) {
    const std::string lkey = lock_key(group_key);
    const std::string mkey = manifest_key(group_key);
    std::string token;
    {
        std::lock_guard lock(mutex_);
        token = owner_ + ":" + std::to_string(++lock_serial_);
    }
    Stopwatch clock;
    bool waited = false;
    try {
        ConnPtr c = acquire();
        for (;;) {
            Reply exists = command_reply(c.get(), redisCommand(c.get(), "EXISTS %b", mkey.data(), mkey.size()), "EXISTS");
            if (exists->type == REDIS_REPLY_INTEGER && exists->integer > 0) {
                release(std::move(c));
                if (waited) counters_.waited++;
                return Claim::published;
            }
            Reply set = command_reply(c.get(),
                                      redisCommand(c.get(), "SET %b %b NX PX %d", lkey.data(), lkey.size(), token.data(),
                                                   token.size(), options_.lock_ttl_ms),
                                      "SET lock");
            if (set->type == REDIS_REPLY_STATUS) {
                // Taken. A publisher may have finished between EXISTS and SET: look once more.
                Reply again = command_reply(c.get(), redisCommand(c.get(), "EXISTS %b", mkey.data(), mkey.size()), "EXISTS");
                {
                    std::lock_guard lock(mutex_);
                    held_locks_[group_key] = token;
                }
                release(std::move(c));
                if (again->type == REDIS_REPLY_INTEGER && again->integer > 0) {
                    release_compile(group_key);
                    if (waited) counters_.waited++;
                    return Claim::published;
                }
                counters_.locks_taken++;
                return Claim::mine;
            }
            if (clock.elapsed_ms() >= options_.wait_ms) {
                release(std::move(c));
                counters_.wait_timeouts++;
                return Claim::timed_out;
            }
            waited = true;
            std::this_thread::sleep_for(std::chrono::milliseconds(std::max(1, options_.poll_ms)));
        }
    } catch (const std::exception&) {
        counters_.errors++;
        return Claim::unavailable;
    }
}

void RemoteTier::release_compile(const std::string& group_key) {
    std::string token;
    {
        std::lock_guard lock(mutex_);
        auto it = held_locks_.find(group_key);
        if (it == held_locks_.end()) return;
        token = std::move(it->second);
        held_locks_.erase(it);
    }
    try {
        ConnPtr c = acquire();
        const std::string lkey = lock_key(group_key);
        command_reply(c.get(),
                      redisCommand(c.get(), "EVAL %s 1 %b %b", kDeleteIfEquals, lkey.data(), lkey.size(), token.data(),
                                   token.size()),
                      "release lock");
        release(std::move(c));
    } catch (const std::exception&) {
        counters_.errors++;  // the lock expires by itself
    }
}

std::string RemoteTier::check() {
    try {
        ConnPtr c = acquire();
        command_reply(c.get(), redisCommand(c.get(), "PING"), describe() + ": PING");
        release(std::move(c));
        return "";
    } catch (const std::exception& e) {
        return e.what();
    }
}

bool RemoteTier::remove(const std::string& group_key) {
    ConnPtr c = acquire();
    const std::string mkey = manifest_key(group_key);
    Reply r = command_reply(c.get(), redisCommand(c.get(), "DEL %b", mkey.data(), mkey.size()), describe() + ": DEL");
    release(std::move(c));
    return r->type == REDIS_REPLY_INTEGER && r->integer > 0;
}

RemoteCounters RemoteTier::counters() const {
    RemoteCounters r;
    r.hits = counters_.hits;
    r.misses = counters_.misses;
    r.incomplete = counters_.incomplete;
    r.damaged = counters_.damaged;
    r.errors = counters_.errors;
    r.published = counters_.published;
    r.publish_errors = counters_.publish_errors;
    r.bytes_read = counters_.bytes_read;
    r.bytes_written = counters_.bytes_written;
    r.locks_taken = counters_.locks_taken;
    r.waited = counters_.waited;
    r.wait_timeouts = counters_.wait_timeouts;
    if (warm_) {
        const WarmPages::Stats w = warm_->stats();
        r.warm_capacity_bytes = w.capacity_bytes;
        r.warm_held_bytes = w.held_bytes;
        r.warm_fetched_bytes = w.warm_bytes_taken;
        r.cold_fetched_bytes = w.cold_bytes_taken;
    }
    return r;
}

}  // namespace cc
