#pragma once
// Read-only memory mapping of a whole file (RAII). An empty file maps to an empty span.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace tokenscope {

class MappedFile {
  public:
    // Throws IoError naming the path and the system's reason.
    explicit MappedFile(const std::string& path);
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;
    ~MappedFile();

    std::span<const std::uint8_t> bytes() const { return {data_, size_}; }
    const std::string& path() const { return path_; }

  private:
    std::string path_;
    const std::uint8_t* data_ = nullptr;
    std::size_t size_ = 0;
};

}  // namespace tokenscope
