#include "util/large_pages.h"

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <new>
#include <sstream>
#include <utility>
#include <vector>

#ifdef _WIN32
#include "util/windows_api.h"
#else
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace tokenscope {

namespace {
bool turned_off_by_environment() {
    const char* env = std::getenv("TOKENSCOPE_LARGE_PAGES");
    return env && std::string(env) == "off";
}
}  // namespace

std::string transparent_huge_pages_mode() {
#ifdef __linux__
    // The file reads like "always [madvise] never": the bracketed word is the mode.
    std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string line;
    if (!in || !std::getline(in, line)) return "unavailable";
    const auto open = line.find('['), close = line.find(']');
    if (open == std::string::npos || close == std::string::npos || close < open)
        return "unavailable";
    return line.substr(open + 1, close - open - 1);
#else
    return "unavailable";
#endif
}

bool large_pages_available() {
    if (turned_off_by_environment()) return false;
    const std::string mode = transparent_huge_pages_mode();
    return mode == "always" || mode == "madvise";
}

std::string large_pages_status() {
    std::string status = "transparent huge pages: " + transparent_huge_pages_mode();
    if (turned_off_by_environment()) status += ", turned off by TOKENSCOPE_LARGE_PAGES=off";
    return status;
}

namespace {
std::size_t whole_pages(std::size_t bytes) {
    if (bytes > SIZE_MAX - kLargePageBytes) throw std::bad_alloc();
    return (bytes + kLargePageBytes - 1) / kLargePageBytes * kLargePageBytes;
}
}  // namespace

std::size_t LargePageBuffer::reserved() const {
    return data_ ? whole_pages(size_) : 0;
}

LargePageBuffer::LargePageBuffer(std::size_t bytes, [[maybe_unused]] Pages pages) : size_(bytes) {
    const std::size_t reserved = whole_pages(bytes);
    if (reserved == 0) return;
#ifdef _WIN32
    // Large pages on Windows need the "lock pages in memory" privilege, which a desktop user
    // does not have: ordinary committed pages (zero-filled, like mmap's).
    data_ = static_cast<std::byte*>(
        VirtualAlloc(nullptr, reserved, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE));
    if (!data_) throw std::bad_alloc();
#else
    // mmap aligns to 4 KiB only: map one page more, keep the aligned 2 MiB-multiple inside,
    // and give back the ends.
    const std::size_t span = reserved + kLargePageBytes;
    void* raw = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) throw std::bad_alloc();
    const auto start = reinterpret_cast<std::uintptr_t>(raw);
    const std::uintptr_t aligned = (start + kLargePageBytes - 1) & ~(kLargePageBytes - 1);
    if (aligned > start) ::munmap(raw, aligned - start);
    const std::uintptr_t end = aligned + reserved;
    if (start + span > end) ::munmap(reinterpret_cast<void*>(end), start + span - end);
    data_ = reinterpret_cast<std::byte*>(aligned);
#ifdef MADV_HUGEPAGE
    // A refusal (THP "never", an old kernel) leaves ordinary pages: slower, still correct.
    if (pages == Pages::Large && large_pages_available()) ::madvise(data_, reserved, MADV_HUGEPAGE);
#endif
#endif
}

LargePageBuffer::LargePageBuffer(LargePageBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

LargePageBuffer& LargePageBuffer::operator=(LargePageBuffer&& other) noexcept {
    if (this != &other) {
        release();
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
    }
    return *this;
}

LargePageBuffer::~LargePageBuffer() {
    release();
}

void LargePageBuffer::release() noexcept {
    if (!data_) return;
#ifdef _WIN32
    VirtualFree(data_, 0, MEM_RELEASE);
#else
    ::munmap(data_, reserved());
#endif
    data_ = nullptr;
    size_ = 0;
}

bool LargePageBuffer::protect(bool writable) {
    if (!data_) return true;
#ifdef _WIN32
    DWORD previous = 0;
    return VirtualProtect(data_, reserved(), writable ? PAGE_READWRITE : PAGE_READONLY,
                          &previous) != 0;
#else
    return ::mprotect(data_, reserved(), writable ? PROT_READ | PROT_WRITE : PROT_READ) == 0;
#endif
}

std::size_t LargePageBuffer::resident_bytes() const {
#ifdef __linux__
    if (!data_) return 0;
    const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    std::vector<unsigned char> in_core((reserved() + page - 1) / page);
    if (::mincore(data_, reserved(), in_core.data()) != 0) return 0;
    std::size_t pages = 0;
    for (const unsigned char c : in_core) pages += c & 1u;
    return pages * page;
#else
    return 0;
#endif
}

std::size_t LargePageBuffer::huge_page_bytes() const {
#ifdef __linux__
    if (!data_) return 0;
    // smaps lists each mapping as "start-end perms ..." followed by "Key: value kB" lines;
    // AnonHugePages counts the mapping's bytes in huge pages.
    std::ifstream in("/proc/self/smaps");
    const auto first = reinterpret_cast<std::uintptr_t>(data_);
    const std::uintptr_t last = first + reserved();
    bool inside = false;
    std::size_t total = 0;
    std::string line;
    while (std::getline(in, line)) {
        const auto dash = line.find('-');
        const auto space = line.find(' ');
        if (dash != std::string::npos && space != std::string::npos && dash < space &&
            line.find(':') > space) {
            std::uintptr_t lo = 0, hi = 0;
            std::istringstream range(line.substr(0, space));
            char sep = 0;
            range >> std::hex >> lo >> sep >> hi;
            inside = range && lo < last && hi > first;
            continue;
        }
        if (inside && line.rfind("AnonHugePages:", 0) == 0) {
            std::istringstream value(line.substr(14));
            std::size_t kib = 0;
            value >> kib;
            total += kib * 1024;
        }
    }
    return total;
#else
    return 0;
#endif
}

}  // namespace tokenscope
