#pragma once
// Anonymous memory in 2 MiB pages where the system offers them (RAII).
//
// Why: a decode step streams every weight once. With 4 KiB pages the CPU's stream prefetchers
// stop at every page boundary and each page costs a TLB walk; on the dev machine (Intel Xeon
// under KVM) one thread read 14-15 GB/s from 4 KiB pages and 17 GB/s from 2 MiB pages, two
// threads 27-28 against 33 GB/s. Linux gives 2 MiB pages to anonymous memory that asks with
// madvise(MADV_HUGEPAGE) when transparent huge pages are "always" or "madvise"; a file
// mapping does not get them. Elsewhere (Windows, THP "never") the buffer is ordinary pages.
#include <cstddef>
#include <string>

namespace tokenscope {

inline constexpr std::size_t kLargePageBytes = std::size_t{2} << 20;

// What the system says about transparent huge pages: "always", "madvise", "never", or
// "unavailable" where there is no such setting (not Linux, or a kernel without THP).
std::string transparent_huge_pages_mode();
// True where asking gives anonymous memory 2 MiB pages ("always" or "madvise"), unless the
// environment variable TOKENSCOPE_LARGE_PAGES is "off": then the process behaves as on a
// system without them (Windows, THP "never"), so that path can be run and tested anywhere.
bool large_pages_available();
// For logs: why large pages are or are not used ("transparent huge pages: madvise", with
// ", turned off by TOKENSCOPE_LARGE_PAGES=off" when the environment says so).
std::string large_pages_status();

// What a LargePageBuffer asks the system for.
enum class Pages {
    Large,     // 2 MiB pages where large_pages_available()
    Ordinary,  // whatever anonymous memory gets by default
};

class LargePageBuffer {
  public:
    LargePageBuffer() = default;
    // Zero-filled, 2 MiB-aligned, `bytes` rounded up to whole 2 MiB pages. Pages are committed
    // on first touch, as with calloc. Throws std::bad_alloc when the system has no room.
    explicit LargePageBuffer(std::size_t bytes, Pages pages = Pages::Large);
    LargePageBuffer(LargePageBuffer&& other) noexcept;
    LargePageBuffer& operator=(LargePageBuffer&& other) noexcept;
    LargePageBuffer(const LargePageBuffer&) = delete;
    LargePageBuffer& operator=(const LargePageBuffer&) = delete;
    ~LargePageBuffer();

    std::byte* data() const { return data_; }
    std::size_t size() const { return size_; }  // as asked for
    // Makes the whole buffer read-only (a stray write then faults instead of corrupting
    // weights). Returns false where the system refuses.
    bool make_read_only() { return protect(false); }
    // Undoes make_read_only (for an owner that rewrites its contents once, then seals them
    // again). Returns false where the system refuses.
    bool make_writable() { return protect(true); }
    // Bytes of this buffer the kernel backs with huge pages now (Linux: /proc/self/smaps);
    // 0 elsewhere. For logs and tests: THP may fall back to small pages when memory is
    // fragmented.
    std::size_t huge_page_bytes() const;
    // Bytes of this buffer in memory now (Linux: mincore, 4 KiB granular; committed pages
    // count once touched); 0 elsewhere. For logs and tests.
    std::size_t resident_bytes() const;

  private:
    void release() noexcept;
    bool protect(bool writable);
    std::size_t reserved() const;  // size_ in whole 2 MiB pages, as mapped

    std::byte* data_ = nullptr;
    std::size_t size_ = 0;
};

}  // namespace tokenscope
