#include "gguf/file.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <new>
#include <optional>

#include <spdlog/spdlog.h>

#include "util/checked_math.h"
#include "util/error.h"
#include "util/large_pages.h"
#include "util/mapped_file.h"

namespace tokenscope::gguf {

struct File::Mapping {
    explicit Mapping(const std::string& path) : file(std::in_place, path) {}
    std::optional<MappedFile> file;  // empty once copied
    LargePageBuffer copy;
    bool copy_in_large_pages = false;

    std::span<const std::uint8_t> bytes() const {
        if (file) return file->bytes();
        return {reinterpret_cast<const std::uint8_t*>(copy.data()), copy.size()};
    }
    // Replaces the mapping by a read-only copy in `pages`. The copy is read from the file
    // (the page cache) rather than from the mapping, which would fault in every 4 KiB page of
    // it first: 470 MiB took 0.65-1.5 s that way. Throws std::bad_alloc (no room for the copy)
    // or IoError with the mapping left as it was.
    void copy_to_memory(const std::string& path, Pages pages) {
        const std::size_t size = file->bytes().size();
        LargePageBuffer fresh(size, pages);
        std::ifstream in(std::filesystem::path(path), std::ios::binary);
        // Whole 2 MiB steps: each destination page is faulted in once, as a huge page, and
        // reads this large go straight from the page cache into it.
        for (std::size_t at = 0; in && at < size; at += kLargePageBytes) {
            const std::size_t n = std::min(kLargePageBytes, size - at);
            in.read(reinterpret_cast<char*>(fresh.data() + at), static_cast<std::streamsize>(n));
        }
        if (!in) {
            throw IoError(path + ": cannot read its " + std::to_string(size) +
                          " bytes into memory (did the file change while it was open?)");
        }
        fresh.make_read_only();
        copy = std::move(fresh);
        copy_in_large_pages = pages == Pages::Large;
        file.reset();
    }
    // copy_to_memory, logged, except that no room for the copy keeps the mapping (with a
    // warning): it still serves every read, slower, which beats failing to load the model.
    bool try_copy_to_memory(const std::string& path, Pages pages) {
        const double mib = static_cast<double>(file->bytes().size()) / (1 << 20);
        const auto start = std::chrono::steady_clock::now();
        try {
            copy_to_memory(path, pages);
        } catch (const std::bad_alloc&) {
            spdlog::warn("{}: no room for a copy of {:.0f} MiB in memory; kept as a file mapping",
                         path, mib);
            return false;
        }
        const double ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                .count();
        if (pages == Pages::Large) {
            spdlog::info(
                "{}: copied {:.0f} MiB into 2 MiB pages in {:.0f} ms ({:.0f} MiB of them "
                "huge pages)",
                path, mib, ms, static_cast<double>(copy.huge_page_bytes()) / (1 << 20));
        } else {
            spdlog::info("{}: copied {:.0f} MiB into ordinary pages in {:.0f} ms", path, mib, ms);
        }
        return true;
    }
};

namespace {

// Nested arrays are legal GGUF but no model uses more than one level; a cap keeps a hostile
// file from exhausting the stack through recursion.
constexpr int kMaxArrayDepth = 8;
// Smallest encodings, used to reject counts that cannot fit in the bytes left before any
// memory is reserved for them.
constexpr std::uint64_t kMinKeyValueBytes = 8 + 1 + 4 + 1;
constexpr std::uint64_t kMinTensorInfoBytes = 8 + 1 + 4 + 8 + 4 + 8;

constexpr std::uint32_t byte_swapped(std::uint32_t v) {
    return (v >> 24) | ((v >> 8) & 0xff00u) | ((v << 8) & 0xff0000u) | (v << 24);
}

std::uint64_t value_size_lower_bound(ValueType type) {
    switch (type) {
        case ValueType::UInt8:
        case ValueType::Int8:
        case ValueType::Bool:
            return 1;
        case ValueType::UInt16:
        case ValueType::Int16:
            return 2;
        case ValueType::UInt32:
        case ValueType::Int32:
        case ValueType::Float32:
            return 4;
        case ValueType::UInt64:
        case ValueType::Int64:
        case ValueType::Float64:
        case ValueType::String:
            return 8;
        case ValueType::Array:
            return 4 + 8;
    }
    return 1;
}

}  // namespace

// Reads the header with a bounds-checked cursor. Every error names the file, the offset of
// the field being read and the key or tensor it belongs to.
class Parser {
  public:
    Parser(File& file) : file_(file), bytes_(file.bytes_) {}

    void run() {
        parse_header();
        for (std::uint64_t i = 0; i < kv_count_; ++i) parse_key_value(i);
        apply_alignment();
        for (std::uint64_t i = 0; i < tensor_count_; ++i) parse_tensor_info(i);
        place_tensor_data();
    }

  private:
    [[noreturn]] void fail(std::uint64_t offset, const std::string& what) const {
        throw FormatError(file_.path_ + ": offset " + std::to_string(offset) + ": " + context_ +
                          what);
    }

    std::uint64_t remaining() const { return bytes_.size() - pos_; }

    void need(std::uint64_t count, const char* what) const {
        if (count > remaining()) {
            fail(pos_, std::string("unexpected end of file reading ") + what + " (needs " +
                           std::to_string(count) + " bytes, " + std::to_string(remaining()) +
                           " left of " + std::to_string(bytes_.size()) + ")");
        }
    }

    template <typename T>
    T read(const char* what) {
        need(sizeof(T), what);
        T value;
        std::memcpy(&value, bytes_.data() + pos_, sizeof(T));
        pos_ += sizeof(T);
        return value;
    }

    std::string read_string(const char* what) {
        const std::uint64_t at = pos_;
        const auto length = read<std::uint64_t>(what);
        if (length > remaining()) {
            fail(at, std::string(what) + " length " + std::to_string(length) +
                         " runs past the end of the file (" + std::to_string(remaining()) +
                         " bytes left of " + std::to_string(bytes_.size()) + ")");
        }
        std::string text(reinterpret_cast<const char*>(bytes_.data() + pos_), length);
        pos_ += length;
        return text;
    }

    void parse_header() {
        if (bytes_.size() < 4 + 4 + 8 + 8) {
            fail(0, "file is " + std::to_string(bytes_.size()) +
                        " bytes, too short for a GGUF header (needs 24)");
        }
        const auto magic = read<std::uint32_t>("magic");
        if (magic != kMagic) {
            char shown[5] = {};
            std::memcpy(shown, &magic, 4);
            for (char& c : shown) {
                if (c && (c < 0x20 || c > 0x7e)) c = '?';
            }
            char hex[16];
            std::snprintf(hex, sizeof hex, "0x%08x", magic);
            fail(0, std::string("bad magic ") + hex + " ('" + shown +
                        "'): not a GGUF file (expected 'GGUF')");
        }
        const auto version = read<std::uint32_t>("version");
        if (version == 1) fail(4, "GGUF version 1 is not supported (only versions 2 and 3)");
        if (version != 2 && version != 3) {
            // A big-endian file reads as a huge version on a little-endian host.
            const std::uint32_t swapped = byte_swapped(version);
            if (swapped == 2 || swapped == 3) {
                fail(4, "big-endian GGUF (version " + std::to_string(swapped) +
                            ") is not supported on this little-endian machine");
            }
            fail(4, "unsupported GGUF version " + std::to_string(version) +
                        " (only versions 2 and 3)");
        }
        file_.version_ = version;
        const std::uint64_t tensor_count_at = pos_;
        tensor_count_ = read<std::uint64_t>("tensor count");
        const std::uint64_t kv_count_at = pos_;
        kv_count_ = read<std::uint64_t>("metadata count");
        if (kv_count_ > remaining() / kMinKeyValueBytes) {
            fail(kv_count_at, "metadata count " + std::to_string(kv_count_) +
                                  " cannot fit in the file's " + std::to_string(bytes_.size()) +
                                  " bytes");
        }
        if (tensor_count_ > remaining() / kMinTensorInfoBytes) {
            fail(tensor_count_at, "tensor count " + std::to_string(tensor_count_) +
                                      " cannot fit in the file's " + std::to_string(bytes_.size()) +
                                      " bytes");
        }
    }

    void parse_key_value(std::uint64_t index) {
        const std::uint64_t at = pos_;
        context_.clear();
        std::string key = read_string("metadata key");
        if (key.empty()) fail(at, "metadata entry " + std::to_string(index) + " has an empty key");
        context_ = "key '" + key + "': ";
        if (file_.metadata_index_.count(key)) fail(at, "duplicate metadata key");
        Value value = read_value(read_value_type("value type"), 0);
        file_.metadata_index_.emplace(key, file_.metadata_.size());
        file_.metadata_.emplace_back(std::move(key), std::move(value));
        context_.clear();
    }

    ValueType read_value_type(const char* what) {
        const std::uint64_t at = pos_;
        const auto id = read<std::uint32_t>(what);
        if (!is_known_value_type(id)) {
            fail(at, "unknown " + std::string(what) + " " + std::to_string(id) +
                         " (known: 0-12, uint8 .. float64)");
        }
        return static_cast<ValueType>(id);
    }

    Value read_value(ValueType type, int depth) {
        switch (type) {
            case ValueType::UInt8:
                return Value::u8(read<std::uint8_t>("uint8 value"));
            case ValueType::Int8:
                return Value::i8(read<std::int8_t>("int8 value"));
            case ValueType::UInt16:
                return Value::u16(read<std::uint16_t>("uint16 value"));
            case ValueType::Int16:
                return Value::i16(read<std::int16_t>("int16 value"));
            case ValueType::UInt32:
                return Value::u32(read<std::uint32_t>("uint32 value"));
            case ValueType::Int32:
                return Value::i32(read<std::int32_t>("int32 value"));
            case ValueType::UInt64:
                return Value::u64(read<std::uint64_t>("uint64 value"));
            case ValueType::Int64:
                return Value::i64(read<std::int64_t>("int64 value"));
            case ValueType::Float32:
                return Value::f32(read<float>("float32 value"));
            case ValueType::Float64:
                return Value::f64(read<double>("float64 value"));
            case ValueType::Bool: {
                const std::uint64_t at = pos_;
                const auto byte = read<std::uint8_t>("bool value");
                if (byte > 1) fail(at, "bool value " + std::to_string(byte) + " is not 0 or 1");
                return Value::boolean(byte == 1);
            }
            case ValueType::String:
                return Value::string(read_string("string value"));
            case ValueType::Array:
                return read_array(depth);
        }
        fail(pos_, "unreachable value type");
    }

    Value read_array(int depth) {
        const std::uint64_t at = pos_;
        if (depth >= kMaxArrayDepth) {
            fail(at, "arrays nested deeper than " + std::to_string(kMaxArrayDepth) + " levels");
        }
        Array array;
        array.element_type = read_value_type("array element type");
        const std::uint64_t count_at = pos_;
        const auto count = read<std::uint64_t>("array length");
        const std::uint64_t min_size = value_size_lower_bound(array.element_type);
        if (count > remaining() / min_size) {
            fail(count_at, "array of " + std::to_string(count) + " " +
                               value_type_name(array.element_type) +
                               " values runs past the end of the file (" +
                               std::to_string(remaining()) + " bytes left)");
        }
        array.items.reserve(count);
        for (std::uint64_t i = 0; i < count; ++i) {
            array.items.push_back(read_value(array.element_type, depth + 1));
        }
        return Value::array(std::move(array));
    }

    void apply_alignment() {
        const Value* value = file_.find("general.alignment");
        if (!value) return;
        context_ = "key 'general.alignment': ";
        if (!value->is_integer()) {
            fail(0, std::string("must be an integer, found ") + value_type_name(value->type()));
        }
        const std::int64_t alignment = value->as_int();
        if (alignment <= 0 || (alignment & (alignment - 1)) != 0 || alignment > (1 << 20)) {
            fail(0, "alignment " + std::to_string(alignment) +
                        " is not a power of two between 1 and 1048576");
        }
        file_.alignment_ = static_cast<std::uint64_t>(alignment);
        context_.clear();
    }

    void parse_tensor_info(std::uint64_t index) {
        const std::uint64_t at = pos_;
        context_.clear();
        TensorInfo info;
        info.name = read_string("tensor name");
        if (info.name.empty()) fail(at, "tensor " + std::to_string(index) + " has an empty name");
        context_ = "tensor '" + info.name + "': ";
        if (file_.tensor_index_.count(info.name)) fail(at, "duplicate tensor name");

        const std::uint64_t dims_at = pos_;
        const auto n_dims = read<std::uint32_t>("dimension count");
        if (n_dims == 0 || n_dims > kMaxDims) {
            fail(dims_at, "dimension count " + std::to_string(n_dims) + " is not between 1 and " +
                              std::to_string(kMaxDims));
        }
        std::int64_t elements = 1;
        for (std::uint32_t d = 0; d < n_dims; ++d) {
            const std::uint64_t dim_at = pos_;
            const auto dim = read<std::int64_t>("dimension");
            if (dim <= 0) {
                fail(dim_at, "dimension " + std::to_string(d) + " is " + std::to_string(dim) +
                                 " (must be positive)");
            }
            if (mul_overflow(elements, dim, &elements)) {
                fail(dim_at, "element count overflows 64 bits at dimension " + std::to_string(d));
            }
            info.dims.push_back(dim);
        }
        info.element_count = elements;

        const std::uint64_t type_at = pos_;
        const auto type_id = read<std::uint32_t>("tensor type");
        const tensor::TypeTraits* traits = tensor::find_traits(type_id);
        if (!traits) {
            std::string supported;
            for (const auto& t : tensor::all_types()) {
                supported += (supported.empty() ? "" : ", ") + std::string(t.name);
            }
            fail(type_at, "unknown tensor type id " + std::to_string(type_id) +
                              " (supported: " + supported + ")");
        }
        info.type = traits->type;
        if (info.dims[0] % traits->block_size != 0) {
            fail(type_at, "row length " + std::to_string(info.dims[0]) + " is not a multiple of " +
                              traits->name + "'s block size " + std::to_string(traits->block_size));
        }
        const std::uint64_t blocks = static_cast<std::uint64_t>(elements / traits->block_size);
        if (mul_overflow<std::uint64_t>(blocks, traits->bytes_per_block, &info.byte_size)) {
            fail(type_at, "byte size overflows 64 bits");
        }
        const std::uint64_t offset_at = pos_;
        info.offset = read<std::uint64_t>("tensor data offset");
        if (info.offset % file_.alignment_ != 0) {
            fail(offset_at, "data offset " + std::to_string(info.offset) +
                                " is not a multiple of the alignment " +
                                std::to_string(file_.alignment_));
        }
        tensor_offset_positions_.push_back(offset_at);
        file_.tensor_index_.emplace(info.name, file_.tensors_.size());
        file_.tensors_.push_back(std::move(info));
        context_.clear();
    }

    void place_tensor_data() {
        const std::uint64_t align = file_.alignment_;
        std::uint64_t data_offset = (pos_ + align - 1) / align * align;
        if (file_.tensors_.empty()) {
            // Vocabulary-only files may end right after the header, without padding.
            file_.data_offset_ = std::min<std::uint64_t>(data_offset, bytes_.size());
            return;
        }
        if (data_offset > bytes_.size()) {
            fail(pos_, "file ends before the tensor data section (expected at offset " +
                           std::to_string(data_offset) + ")");
        }
        file_.data_offset_ = data_offset;
        const std::uint64_t data_size = bytes_.size() - data_offset;
        for (std::size_t i = 0; i < file_.tensors_.size(); ++i) {
            TensorInfo& info = file_.tensors_[i];
            context_ = "tensor '" + info.name + "': ";
            if (info.offset > data_size || info.byte_size > data_size - info.offset) {
                fail(tensor_offset_positions_[i],
                     "data [" + std::to_string(data_offset + info.offset) + ", " +
                         std::to_string(data_offset + info.offset + info.byte_size) +
                         ") lies outside the file (" + std::to_string(bytes_.size()) + " bytes)");
            }
            info.data = bytes_.data() + data_offset + info.offset;
        }
        // Tensors must not share bytes: sort by offset and check neighbours.
        std::vector<std::size_t> order(file_.tensors_.size());
        for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
        std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
            return file_.tensors_[a].offset < file_.tensors_[b].offset;
        });
        for (std::size_t k = 1; k < order.size(); ++k) {
            const TensorInfo& prev = file_.tensors_[order[k - 1]];
            const TensorInfo& next = file_.tensors_[order[k]];
            if (prev.offset + prev.byte_size > next.offset) {
                context_ = "tensor '" + next.name + "': ";
                fail(tensor_offset_positions_[order[k]],
                     "data overlaps tensor '" + prev.name + "'");
            }
        }
        context_.clear();
    }

    File& file_;
    std::span<const std::uint8_t> bytes_;
    std::uint64_t pos_ = 0;
    std::uint64_t tensor_count_ = 0;
    std::uint64_t kv_count_ = 0;
    std::string context_;
    std::vector<std::uint64_t> tensor_offset_positions_;
};

std::string TensorInfo::shape_string() const {
    std::string out;
    for (std::size_t i = 0; i < dims.size(); ++i) {
        if (i) out += " x ";
        out += std::to_string(dims[i]);
    }
    return out;
}

File File::open(const std::string& path, FileBytes where) {
    File file;
    file.path_ = path;
    file.mapping_ = std::make_unique<Mapping>(path);
    if (where == FileBytes::LargePages && file.mapping_->file->bytes().size() > 0) {
        if (large_pages_available()) {
            file.mapping_->try_copy_to_memory(path, Pages::Large);
        } else {
            spdlog::info("{}: kept as a file mapping ({})", path, large_pages_status());
        }
    }
    file.bytes_ = file.mapping_->bytes();
    Parser(file).run();
    spdlog::debug("gguf: {} v{}: {} keys, {} tensors, data at {}", path, file.version_,
                  file.metadata_.size(), file.tensors_.size(), file.data_offset_);
    return file;
}

File File::parse(std::string display_name, std::span<const std::uint8_t> bytes) {
    File file;
    file.path_ = std::move(display_name);
    file.bytes_ = bytes;
    Parser(file).run();
    return file;
}

bool File::in_large_pages() const {
    return is_private_copy() && mapping_->copy_in_large_pages;
}

bool File::is_private_copy() const {
    return mapping_ && !mapping_->file;
}

bool File::copy_out_of_mapping() {
    if (!mapping_ || bytes_.empty()) return false;
    if (!mapping_->file) return true;
    if (!mapping_->try_copy_to_memory(path_, Pages::Ordinary)) return false;
    bytes_ = mapping_->bytes();
    for (TensorInfo& t : tensors_) t.data = bytes_.data() + data_offset_ + t.offset;  // as parsed
    return true;
}

bool File::edit_copy(const std::function<void(std::span<std::uint8_t>)>& edit) {
    if (!is_private_copy() || !mapping_->copy.make_writable()) return false;
    struct Seal {  // read-only again however edit ends
        LargePageBuffer& copy;
        ~Seal() { copy.make_read_only(); }
    } seal{mapping_->copy};
    edit({reinterpret_cast<std::uint8_t*>(mapping_->copy.data()), mapping_->copy.size()});
    return true;
}

File::File(File&&) noexcept = default;
File& File::operator=(File&&) noexcept = default;
File::~File() = default;

const Value* File::find(std::string_view key) const {
    auto it = metadata_index_.find(std::string(key));
    return it == metadata_index_.end() ? nullptr : &metadata_[it->second].second;
}

const TensorInfo* File::find_tensor(std::string_view name) const {
    auto it = tensor_index_.find(std::string(name));
    return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

void File::fail_key(std::string_view key, const std::string& what) const {
    throw FormatError(path_ + ": key '" + std::string(key) + "': " + what);
}

namespace {
template <typename F>
decltype(auto) typed(const File& file, std::string_view key, const Value& value, F&& get) {
    try {
        return get(value);
    } catch (const InvalidArgument& e) {
        throw FormatError(file.path() + ": key '" + std::string(key) + "': " + e.what());
    }
}
}  // namespace

std::string File::require_string(std::string_view key) const {
    const Value* v = find(key);
    if (!v) fail_key(key, "missing");
    return typed(*this, key, *v, [](const Value& x) { return x.as_string(); });
}

std::uint64_t File::require_uint(std::string_view key) const {
    const Value* v = find(key);
    if (!v) fail_key(key, "missing");
    return typed(*this, key, *v, [](const Value& x) { return x.as_uint(); });
}

const Array& File::require_array(std::string_view key) const {
    const Value* v = find(key);
    if (!v) fail_key(key, "missing");
    return typed(*this, key, *v, [](const Value& x) -> const Array& { return x.as_array(); });
}

std::string File::optional_string(std::string_view key, std::string fallback) const {
    const Value* v = find(key);
    return v ? typed(*this, key, *v, [](const Value& x) { return x.as_string(); }) : fallback;
}

std::uint64_t File::optional_uint(std::string_view key, std::uint64_t fallback) const {
    const Value* v = find(key);
    return v ? typed(*this, key, *v, [](const Value& x) { return x.as_uint(); }) : fallback;
}

std::int64_t File::optional_int(std::string_view key, std::int64_t fallback) const {
    const Value* v = find(key);
    return v ? typed(*this, key, *v, [](const Value& x) { return x.as_int(); }) : fallback;
}

double File::optional_double(std::string_view key, double fallback) const {
    const Value* v = find(key);
    return v ? typed(*this, key, *v, [](const Value& x) { return x.as_double(); }) : fallback;
}

bool File::optional_bool(std::string_view key, bool fallback) const {
    const Value* v = find(key);
    return v ? typed(*this, key, *v, [](const Value& x) { return x.as_bool(); }) : fallback;
}

std::uint64_t File::tensor_bytes() const {
    std::uint64_t total = 0;
    for (const auto& t : tensors_) total += t.byte_size;
    return total;
}

}  // namespace tokenscope::gguf
