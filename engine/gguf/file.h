#pragma once
// A validated, memory-mapped GGUF file (versions 2 and 3). Opening checks everything the
// format promises; any violation is a FormatError whose message names the file, the byte
// offset, the key or tensor involved and what is wrong. Each TensorInfo points into the File's
// bytes, which live as long as the File: the mapping itself, or (FileBytes::LargePages) a
// read-only copy in 2 MiB pages that the CPU streams faster (util/large_pages.h).
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gguf/value.h"
#include "tensor/type.h"

namespace tokenscope::gguf {

inline constexpr std::uint32_t kMagic = 0x46554747;  // "GGUF" read as little-endian uint32
inline constexpr std::uint64_t kDefaultAlignment = 32;
inline constexpr std::uint32_t kMaxDims = 4;  // GGML_MAX_DIMS

struct TensorInfo {
    std::string name;
    std::vector<std::int64_t> dims;  // dims[0] is the row length (ggml's ne[0])
    tensor::Type type = tensor::Type::F32;
    std::uint64_t offset = 0;  // relative to the start of the data section
    std::uint64_t byte_size = 0;
    std::int64_t element_count = 0;
    const std::uint8_t* data = nullptr;  // into the mapping

    std::int64_t rows() const { return dims.empty() ? 1 : element_count / dims[0]; }
    std::string shape_string() const;  // "640 x 262144"
};

// Where an opened file's bytes live.
enum class FileBytes {
    Mapped,      // the file mapping: nothing copied, pages shared with the page cache
    LargePages,  // copied into anonymous 2 MiB pages where the system offers them (and has
                 // room for the copy), else Mapped
};

class File {
  public:
    // Maps and validates `path`. Throws IoError or FormatError.
    static File open(const std::string& path, FileBytes where = FileBytes::Mapped);
    // Validates bytes already in memory (the fuzzer, tests). `bytes` must outlive the File.
    static File parse(std::string display_name, std::span<const std::uint8_t> bytes);

    File(File&&) noexcept;
    File& operator=(File&&) noexcept;
    ~File();

    const std::string& path() const { return path_; }
    std::uint32_t version() const { return version_; }
    std::uint64_t alignment() const { return alignment_; }
    std::uint64_t data_offset() const { return data_offset_; }
    std::uint64_t file_size() const { return bytes_.size(); }
    // True when the bytes are a copy in large pages (open(..., FileBytes::LargePages) on a
    // system that offers them).
    bool in_large_pages() const;
    // True when the bytes are the File's own copy (in large pages or not), not the mapping.
    bool is_private_copy() const;
    // Replaces a file mapping by a read-only copy in ordinary pages, for an owner that will
    // rewrite tensors (edit_copy) where large pages are not offered; every TensorInfo::data
    // moves into the copy. Returns whether the bytes are a private copy afterwards: true at once
    // for a copy, false for parse()'s bytes and, with a warning and the mapping kept, when the
    // system has no room for the copy. Throws IoError when the file cannot be read again.
    bool copy_out_of_mapping();
    // For the owner of a private copy (is_private_copy()) that stores some tensors in another
    // layout (the engine's interleaved weights, tensor/interleaved_rows.h): runs edit(bytes)
    // with the copy writable, then makes it read-only again. Returns false without running
    // edit when the bytes are a file mapping (shared with the page cache) or the system
    // refuses. Tensor offsets and sizes stay as parsed.
    bool edit_copy(const std::function<void(std::span<std::uint8_t>)>& edit);

    const std::vector<std::pair<std::string, Value>>& metadata() const { return metadata_; }
    const Value* find(std::string_view key) const;
    const std::vector<TensorInfo>& tensors() const { return tensors_; }
    const TensorInfo* find_tensor(std::string_view name) const;

    // Typed metadata getters: throw FormatError naming the file and key when the key is
    // absent or holds the wrong type. The optional_* variants return the fallback when absent
    // (but still throw on a wrong type).
    std::string require_string(std::string_view key) const;
    std::uint64_t require_uint(std::string_view key) const;
    const Array& require_array(std::string_view key) const;
    std::string optional_string(std::string_view key, std::string fallback) const;
    std::uint64_t optional_uint(std::string_view key, std::uint64_t fallback) const;
    std::int64_t optional_int(std::string_view key, std::int64_t fallback) const;
    double optional_double(std::string_view key, double fallback) const;
    bool optional_bool(std::string_view key, bool fallback) const;

    // Sum of all tensors' byte sizes.
    std::uint64_t tensor_bytes() const;

  private:
    File() = default;
    struct Mapping;
    [[noreturn]] void fail_key(std::string_view key, const std::string& what) const;

    std::unique_ptr<Mapping> mapping_;  // null for parse()
    std::span<const std::uint8_t> bytes_;
    std::string path_;
    std::uint32_t version_ = 0;
    std::uint64_t alignment_ = kDefaultAlignment;
    std::uint64_t data_offset_ = 0;
    std::vector<std::pair<std::string, Value>> metadata_;
    std::unordered_map<std::string, std::size_t> metadata_index_;
    std::vector<TensorInfo> tensors_;
    std::unordered_map<std::string, std::size_t> tensor_index_;

    friend class Parser;
};

}  // namespace tokenscope::gguf
