#include "gguf/writer.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#ifdef _WIN32
#include <io.h>
#else
#include <unistd.h>
#endif

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

void Writer::check_new_tensor(const std::string& name, const std::vector<std::int64_t>& dims) const {
    for (const auto& t : tensors_) {
        if (t.name == name) throw InvalidArgument("tensor '" + name + "' added twice");
    }
    if (dims.empty() || dims.size() > kMaxDims) {
        throw InvalidArgument("tensor '" + name + "': " + std::to_string(dims.size()) +
                              " dimensions (must be 1 to 4)");
    }
    for (auto d : dims) {
        if (d <= 0) throw InvalidArgument("tensor '" + name + "': non-positive dimension");
    }
}

std::size_t Writer::expected_bytes(const PendingTensor& t) const {
    std::int64_t elements = 1;
    for (auto d : t.dims) elements *= d;
    return tensor::row_bytes(t.type, t.dims[0]) * static_cast<std::size_t>(elements / t.dims[0]);
}

void Writer::add_tensor(const std::string& name, tensor::Type type, std::vector<std::int64_t> dims,
                        std::span<const std::uint8_t> data) {
    check_new_tensor(name, dims);
    PendingTensor pending{name, type, std::move(dims), {}, false};
    const std::size_t expected = expected_bytes(pending);
    if (data.size() != expected) {
        throw InvalidArgument("tensor '" + name + "': " + std::to_string(data.size()) +
                              " bytes of data, its type and shape need " +
                              std::to_string(expected));
    }
    pending.data.assign(data.begin(), data.end());
    tensors_.push_back(std::move(pending));
}

void Writer::add_tensor_info(const std::string& name, tensor::Type type, std::vector<std::int64_t> dims) {
    check_new_tensor(name, dims);
    PendingTensor pending{name, type, std::move(dims), {}, true};
    expected_bytes(pending);  // throws when the row length does not fit the type
    tensors_.push_back(std::move(pending));
}

std::uint64_t Writer::alignment() const {
    for (const auto& [key, value] : metadata_) {
        if (key == "general.alignment") return value.as_uint();
    }
    return kDefaultAlignment;
}

std::vector<std::uint8_t> Writer::header_bytes() const {
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
        offset += (expected_bytes(t) + align - 1) / align * align;
    }
    if (!tensors_.empty()) sink.pad_to(align);
    return std::move(sink.out);
}

std::vector<std::uint8_t> Writer::to_bytes() const {
    for (const auto& t : tensors_) {
        if (t.streamed) throw InvalidArgument("tensor '" + t.name + "' has no data (use write_streamed)");
    }
    const std::uint64_t align = alignment();
    ByteSink sink;
    sink.out = header_bytes();
    for (const auto& t : tensors_) {
        sink.append(t.data.data(), t.data.size());
        sink.pad_to(align);
    }
    return std::move(sink.out);
}

namespace {

// An open temporary file that is removed unless commit() renamed it into place.
class TemporaryFile {
  public:
    explicit TemporaryFile(const std::string& target) : target_(target), path_(target + ".partial") {
        file_ = std::fopen(path_.c_str(), "wb");
        if (!file_) fail("cannot create");
    }
    TemporaryFile(const TemporaryFile&) = delete;
    TemporaryFile& operator=(const TemporaryFile&) = delete;
    ~TemporaryFile() {
        if (file_) std::fclose(file_);
        if (!committed_) std::remove(path_.c_str());
    }
    void write(const std::uint8_t* data, std::size_t size) {
        if (size > 0 && std::fwrite(data, 1, size, file_) != size) fail("write failed");
    }
    void commit() {
        if (std::fflush(file_) != 0) fail("write failed");
#ifdef _WIN32
        if (::_commit(::_fileno(file_)) != 0) fail("flush to disk failed");
#else
        if (::fsync(::fileno(file_)) != 0) fail("flush to disk failed");
#endif
        std::FILE* f = file_;
        file_ = nullptr;
        if (std::fclose(f) != 0) fail("close failed");
        std::error_code error;
        std::filesystem::rename(path_, target_, error);
        if (error) throw IoError(target_ + ": cannot rename from " + path_ + ": " + error.message());
        committed_ = true;
    }

  private:
    [[noreturn]] void fail(const char* what) {
        const int e = errno;
        throw IoError(path_ + " (temporary file for " + target_ + "): " + what + ": " + std::strerror(e));
    }
    std::string target_;
    std::string path_;
    std::FILE* file_ = nullptr;
    bool committed_ = false;
};

}  // namespace

void Writer::write_streamed(const std::string& path, const TensorProducer& produce) const {
    const std::uint64_t align = alignment();
    const std::vector<std::uint8_t> header = header_bytes();
    TemporaryFile file(path);
    file.write(header.data(), header.size());
    std::vector<std::uint8_t> produced;
    const std::vector<std::uint8_t> zeros(static_cast<std::size_t>(align), 0);
    for (std::size_t i = 0; i < tensors_.size(); ++i) {
        const PendingTensor& t = tensors_[i];
        const std::vector<std::uint8_t>* data = &t.data;
        if (t.streamed) {
            produced.clear();
            produce(i, produced);
            if (produced.size() != expected_bytes(t)) {
                throw InvalidArgument("tensor '" + t.name + "': producer gave " + std::to_string(produced.size()) +
                                      " bytes, its type and shape need " + std::to_string(expected_bytes(t)));
            }
            data = &produced;
        }
        file.write(data->data(), data->size());
        const std::size_t pad = static_cast<std::size_t>((align - data->size() % align) % align);
        file.write(zeros.data(), pad);
    }
    file.commit();
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
