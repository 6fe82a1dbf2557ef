// A read-only memory mapping of a whole file (RAII). Weights are used in place from the page cache,
// and so are linked group files (DESIGN §7: the CPU backend attends to their K/V in place).
//
// The hazard of any file mapping: if the file is truncated in place (or its storage fails) while
// mapped, touching a page past the new end raises SIGBUS. Our own files are immutable once renamed
// into place and only ever replaced by rename or removed by unlink, which leave existing mappings
// valid; only an outside program truncating or rewriting a file in place can cause it. What we do:
// - read_guarded() runs a pass over a mapping (the checksum verification of a group file) with
//   SIGBUS on that thread turned into a std::runtime_error naming the file, so a file damaged
//   while being verified is reported and rebuilt like any other damaged file;
// - every live mapping is registered with a process-wide SIGBUS handler: a fault anywhere else
//   inside a mapping (attention reading a linked group) prints one line naming the file to stderr
//   and exits with status 135 (128 + SIGBUS); the process cannot continue, as the bytes it was
//   computing with are gone. A fault outside every registered mapping goes to the handler that
//   was installed before ours (or the default action: terminate with a core dump).
// The handler is global state by necessity (signal dispositions belong to the process); it is
// installed once, when the first mapping is made.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>

namespace cc {

class MappedFile {
public:
    MappedFile() = default;
    // Throws std::runtime_error naming the file when it cannot be opened or mapped. populate: map
    // every page now (MAP_POPULATE), for a file that is about to be read whole: one call into the
    // kernel instead of a page fault per page or two.
    explicit MappedFile(const std::filesystem::path& path, bool populate = false);
    ~MappedFile();
    MappedFile(MappedFile&& other) noexcept;
    MappedFile& operator=(MappedFile&& other) noexcept;
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    std::span<const std::byte> bytes() const { return {data_, size_}; }
    const std::byte* data() const { return data_; }
    size_t size() const { return size_; }
    const std::filesystem::path& path() const { return path_; }

    // Runs `pass` (which reads this mapping) with a SIGBUS raised inside the mapping on this thread
    // turned into std::runtime_error "<file>: <what>: the file was truncated or became unreadable
    // while mapped". On such a fault `pass` is abandoned mid-way (a jump out of the signal
    // handler): it must own nothing that needs a destructor (plain loops over the bytes, hashing
    // into state owned by the caller).
    void read_guarded(const char* what, const std::function<void()>& pass) const;

private:
    void unmap();
    std::filesystem::path path_;
    const std::byte* data_ = nullptr;
    size_t size_ = 0;
    void* registration_ = nullptr;  // this mapping's slot in the SIGBUS handler's registry
};

// Drops this process's resident pages of a read-only file mapping's byte range (the whole pages
// inside it): the bytes stay readable and are read back from the file (or page cache) on the next
// access. For memory a reader has copied elsewhere (e.g. weights prepacked at load). Never call it
// on anonymous or written memory, whose contents would be lost.
void release_mapped_pages(const void* data, size_t n_bytes);
// Gives back to the system the whole pages inside a byte range of anonymous memory (a private
// anonymous mapping) that nothing will read again: its contents are lost (the pages read as zeros
// if touched). For generated weights a backend has copied (ModelWeights::disposable).
void discard_anonymous_pages(const void* data, size_t n_bytes);

}  // namespace cc
