#include "gguf/writer.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "gguf/file.h"
#include "util/error.h"

namespace tokenscope::gguf {

namespace {

class ByteSink {
  public:
    template <typename T>
    void put(T value) {
        append(&value, sizeof(T));
    }
    void put_string(const std::string& text) {
        put<std::uint64_t>(text.size());
        append(text.data(), text.size());
    }
    // resize + memcpy rather than vector::insert: GCC 12 reports a false -Wstringop-overflow
    // for insert of a byte range at -O2.
    void append(const void* data, std::size_t size) {
        if (size == 0) return;
        const std::size_t at = out.size();
        out.resize(at + size);
        std::memcpy(out.data() + at, data, size);
    }
    void pad_to(std::uint64_t alignment) {
        while (out.size() % alignment != 0) out.push_back(0);
    }
    void put_value(const Value& value) {
        switch (value.type()) {
            case ValueType::UInt8:
                put<std::uint8_t>(static_cast<std::uint8_t>(value.as_uint()));
                break;
            case ValueType::Int8:
                put<std::int8_t>(static_cast<std::int8_t>(value.as_int()));
                break;
            case ValueType::UInt16:
                put<std::uint16_t>(static_cast<std::uint16_t>(value.as_uint()));
                break;
            case ValueType::Int16:
                put<std::int16_t>(static_cast<std::int16_t>(value.as_int()));
                break;
            case ValueType::UInt32:
                put<std::uint32_t>(static_cast<std::uint32_t>(value.as_uint()));
                break;
            case ValueType::Int32:
                put<std::int32_t>(static_cast<std::int32_t>(value.as_int()));
                break;
            case ValueType::UInt64:
                put<std::uint64_t>(value.as_uint());
                break;
            case ValueType::Int64:
                put<std::int64_t>(value.as_int());
                break;
            case ValueType::Float32:
                put<float>(static_cast<float>(value.as_double()));
                break;
            case ValueType::Float64:
                put<double>(value.as_double());
                break;
            case ValueType::Bool:
                put<std::uint8_t>(value.as_bool() ? 1 : 0);
                break;
            case ValueType::String:
                put_string(value.as_string());
                break;
            case ValueType::Array: {
                const Array& array = value.as_array();
                put<std::uint32_t>(static_cast<std::uint32_t>(array.element_type));
                put<std::uint64_t>(array.items.size());
                for (const Value& item : array.items) {
                    if (item.type() != array.element_type) {
                        throw InvalidArgument(std::string("array of ") +
                                              value_type_name(array.element_type) + " holds a " +
                                              value_type_name(item.type()));
                    }
                    put_value(item);
                }
                break;
            }
        }
    }
    std::vector<std::uint8_t> out;
};

}  // namespace

void Writer::set(const std::string& key, Value value) {
    for (auto& [existing, stored] : metadata_) {
        if (existing == key) {
            stored = std::move(value);
            return;
        }
    }
    metadata_.emplace_back(key, std::move(value));
}

void Writer::add_tensor(const std::string& name, tensor::Type type, std::vector<std::int64_t> dims,
                        std::span<const std::uint8_t> data) {
    for (const auto& t : tensors_) {
        if (t.name == name) throw InvalidArgument("tensor '" + name + "' added twice");
    }
    if (dims.empty() || dims.size() > kMaxDims) {
        throw InvalidArgument("tensor '" + name + "': " + std::to_string(dims.size()) +
                              " dimensions (must be 1 to 4)");
    }
    std::int64_t elements = 1;
    for (auto d : dims) {
        if (d <= 0) throw InvalidArgument("tensor '" + name + "': non-positive dimension");
        elements *= d;
    }
    const std::size_t expected =
        tensor::row_bytes(type, dims[0]) * static_cast<std::size_t>(elements / dims[0]);
    if (data.size() != expected) {
        throw InvalidArgument("tensor '" + name + "': " + std::to_string(data.size()) +
                              " bytes of data, its type and shape need " +
                              std::to_string(expected));
    }
    tensors_.push_back({name, type, std::move(dims), {data.begin(), data.end()}});
}

std::uint64_t Writer::alignment() const {
    for (const auto& [key, value] : metadata_) {
        if (key == "general.alignment") return value.as_uint();
    }
    return kDefaultAlignment;
}

std::vector<std::uint8_t> Writer::to_bytes() const {
    const std::uint64_t align = alignment();
    ByteSink sink;
    sink.put<std::uint32_t>(kMagic);
    sink.put<std::uint32_t>(version_);
    sink.put<std::uint64_t>(tensors_.size());
    sink.put<std::uint64_t>(metadata_.size());
    for (const auto& [key, value] : metadata_) {
        sink.put_string(key);
        sink.put<std::uint32_t>(static_cast<std::uint32_t>(value.type()));
        sink.put_value(value);
    }
    std::uint64_t offset = 0;
    for (const auto& t : tensors_) {
        sink.put_string(t.name);
        sink.put<std::uint32_t>(static_cast<std::uint32_t>(t.dims.size()));
        for (auto d : t.dims) sink.put<std::int64_t>(d);
        sink.put<std::uint32_t>(static_cast<std::uint32_t>(t.type));
        sink.put<std::uint64_t>(offset);
        offset += (t.data.size() + align - 1) / align * align;
    }
    if (!tensors_.empty()) {
        sink.pad_to(align);
        for (const auto& t : tensors_) {
            sink.append(t.data.data(), t.data.size());
            sink.pad_to(align);
        }
    }
    return std::move(sink.out);
}

void Writer::write(const std::string& path) const {
    const std::vector<std::uint8_t> bytes = to_bytes();
    const std::string temporary = path + ".partial";
    {
        std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
        if (!out) throw IoError(temporary + ": cannot open for writing");
        out.write(reinterpret_cast<const char*>(bytes.data()),
                  static_cast<std::streamsize>(bytes.size()));
        if (!out) throw IoError(temporary + ": write failed");
    }
    std::error_code error;
    std::filesystem::rename(temporary, path, error);
    if (error) throw IoError(path + ": cannot rename from " + temporary + ": " + error.message());
}

}  // namespace tokenscope::gguf
