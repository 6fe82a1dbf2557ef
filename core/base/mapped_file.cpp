#include "core/base/mapped_file.h"

#include <atomic>
#include <cerrno>
#include <csetjmp>
#include <csignal>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace cc {
namespace {

[[noreturn]] void fail(const std::filesystem::path& path, const char* what, int err) {
    throw std::runtime_error(path.string() + ": " + what + ": " + std::strerror(err));
}

// Closes the descriptor on every path out of the constructor; the mapping outlives it.
struct FdGuard {
    int fd;
    ~FdGuard() {
        if (fd >= 0) ::close(fd);
    }
};

// ---- the SIGBUS registry (see mapped_file.h) --------------------------------------------------------
//
// Everything the handler reads is a lock-free singly linked list of slots that are never freed
// (reused instead), so it can walk the list at any moment with atomic loads only.
struct Slot {
    std::atomic<uintptr_t> begin{0};
    std::atomic<uintptr_t> end{0};
    std::atomic<bool> claimed{true};
    Slot* next = nullptr;     // fixed before the slot is published
    char path[1024] = {};     // written while the slot is claimed and its range is empty
};

std::atomic<Slot*> g_slots{nullptr};
struct sigaction g_previous {};
std::once_flag g_install_once;

// The verification pass in progress on this thread, if any. initial-exec: the handler must not
// make the dynamic loader allocate a TLS block.
struct Guard {
    sigjmp_buf jump;
    uintptr_t begin = 0, end = 0;
};
__attribute__((tls_model("initial-exec"))) thread_local Guard* t_guard = nullptr;

void write_str(const char* s) {
    const size_t n = std::strlen(s);
    ssize_t ignored = ::write(STDERR_FILENO, s, n);
    (void)ignored;
}

void on_sigbus(int sig, siginfo_t* info, void* context) {
    const auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
    if (Guard* g = t_guard; g != nullptr && addr >= g->begin && addr < g->end) siglongjmp(g->jump, 1);
    for (Slot* s = g_slots.load(std::memory_order_acquire); s != nullptr; s = s->next) {
        const uintptr_t b = s->begin.load(std::memory_order_acquire), e = s->end.load(std::memory_order_acquire);
        if (addr >= b && addr < e) {
            write_str("contextcache: fatal: SIGBUS reading the memory-mapped file ");
            write_str(s->path);
            write_str(": it was truncated or rewritten in place, or its storage failed, while in use "
                      "(cache files must only be replaced by rename or removed); exiting\n");
            ::_exit(128 + SIGBUS);
        }
    }
    // Not one of ours: whoever handled SIGBUS before us, else the default action (returning
    // re-executes the faulting access, which now terminates the process).
    if ((g_previous.sa_flags & SA_SIGINFO) != 0 && g_previous.sa_sigaction != nullptr) {
        g_previous.sa_sigaction(sig, info, context);
        return;
    }
    if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
        g_previous.sa_handler(sig);
        return;
    }
    ::signal(SIGBUS, SIG_DFL);
}

void install_handler() {
    std::call_once(g_install_once, [] {
        struct sigaction sa {};
        sa.sa_sigaction = &on_sigbus;
        sa.sa_flags = SA_SIGINFO;  // siglongjmp restores the mask sigsetjmp saved (SIGBUS unblocked)
        sigemptyset(&sa.sa_mask);
        ::sigaction(SIGBUS, &sa, &g_previous);
    });
}

Slot* register_mapping(const std::filesystem::path& path, const std::byte* data, size_t size) {
    install_handler();
    Slot* slot = nullptr;
    for (Slot* s = g_slots.load(std::memory_order_acquire); s != nullptr && slot == nullptr; s = s->next) {
        bool expected = false;
        if (s->claimed.compare_exchange_strong(expected, true)) slot = s;
    }
    const bool fresh = slot == nullptr;
    if (fresh) slot = new Slot;  // never freed: the handler may be walking the list
    std::strncpy(slot->path, path.c_str(), sizeof slot->path - 1);
    slot->path[sizeof slot->path - 1] = '\0';
    slot->begin.store(reinterpret_cast<uintptr_t>(data), std::memory_order_release);
    slot->end.store(reinterpret_cast<uintptr_t>(data) + size, std::memory_order_release);
    if (fresh) {
        slot->next = g_slots.load(std::memory_order_relaxed);
        while (!g_slots.compare_exchange_weak(slot->next, slot, std::memory_order_release, std::memory_order_relaxed)) {
        }
    }
    return slot;
}

void unregister_mapping(void* registration) {
    auto* slot = static_cast<Slot*>(registration);
    slot->end.store(0, std::memory_order_release);
    slot->begin.store(0, std::memory_order_release);
    slot->claimed.store(false, std::memory_order_release);
}

}  // namespace

MappedFile::MappedFile(const std::filesystem::path& path, bool populate) : path_(path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail(path, "cannot open", errno);
    FdGuard guard{fd};
    struct stat st {};
    if (::fstat(fd, &st) != 0) fail(path, "cannot stat", errno);
    if (!S_ISREG(st.st_mode)) throw std::runtime_error(path.string() + ": not a regular file");
    if (st.st_size == 0) return;  // mmap refuses length 0; an empty file is an empty span
    const auto n_bytes = static_cast<size_t>(st.st_size);
    void* p = ::mmap(nullptr, n_bytes, PROT_READ, MAP_PRIVATE | (populate ? MAP_POPULATE : 0), fd, 0);
    if (p == MAP_FAILED) fail(path, "cannot mmap", errno);
    data_ = static_cast<const std::byte*>(p);
    size_ = n_bytes;
    registration_ = register_mapping(path_, data_, size_);
}

void MappedFile::unmap() {
    if (data_ == nullptr) return;
    unregister_mapping(registration_);
    ::munmap(const_cast<std::byte*>(data_), size_);
    data_ = nullptr;
    size_ = 0;
    registration_ = nullptr;
}

MappedFile::~MappedFile() { unmap(); }

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      registration_(std::exchange(other.registration_, nullptr)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
    if (this != &other) {
        unmap();
        path_ = std::move(other.path_);
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
        registration_ = std::exchange(other.registration_, nullptr);
    }
    return *this;
}

void MappedFile::read_guarded(const char* what, const std::function<void()>& pass) const {
    if (data_ == nullptr) return pass();
    install_handler();
    Guard guard;
    guard.begin = reinterpret_cast<uintptr_t>(data_);
    guard.end = guard.begin + size_;
    struct Restore {
        Guard* previous;
        ~Restore() { t_guard = previous; }
    } restore{t_guard};
    t_guard = &guard;
    if (sigsetjmp(guard.jump, 1) != 0)
        throw std::runtime_error(path_.string() + ": " + what +
                                 ": the file was truncated or became unreadable while mapped (SIGBUS)");
    pass();
}

namespace {
// MADV_DONTNEED over the whole pages inside [data, data + n_bytes): a page shared with the bytes
// around the range is kept.
void dont_need_whole_pages(const void* data, size_t n_bytes) {
    static const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
    const uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + page - 1) / page * page;
    const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + n_bytes) / page * page;
    if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);  // advice: failure is harmless
}
}  // namespace

void release_mapped_pages(const void* data, size_t n_bytes) {
    dont_need_whole_pages(data, n_bytes);
}

void discard_anonymous_pages(const void* data, size_t n_bytes) {
    dont_need_whole_pages(data, n_bytes);
}

}  // namespace cc
