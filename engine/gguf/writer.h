#pragma once
// Writes GGUF v3 (or v2) files: metadata in insertion order, tensor infos, and tensor data
// each padded to the alignment (general.alignment when set, else 32).
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "gguf/value.h"
#include "tensor/type.h"

namespace tokenscope::gguf {

class Writer {
  public:
    explicit Writer(std::uint32_t version = 3) : version_(version) {}

    // Sets a metadata key; setting an existing key replaces its value in place.
    void set(const std::string& key, Value value);
    // Adds a tensor; `data` must be exactly the bytes its type and dims require
    // (throws InvalidArgument otherwise, or when the name is already used).
    void add_tensor(const std::string& name, tensor::Type type, std::vector<std::int64_t> dims,
                    std::span<const std::uint8_t> data);

    // Declares a tensor whose bytes come later, from write_streamed's producer (files too
    // large to hold twice in memory: quantize). Checks the name and dims like add_tensor.
    void add_tensor_info(const std::string& name, tensor::Type type, std::vector<std::int64_t> dims);

    std::vector<std::uint8_t> to_bytes() const;
    // Called once per tensor, in the order they were added, to fill `data` with exactly the
    // bytes its type and dims need (tensors added with add_tensor already hold theirs and are
    // not asked for).
    using TensorProducer = std::function<void(std::size_t index, std::vector<std::uint8_t>& data)>;
    // Streams header and tensors to a temporary file beside `path` (PATH.partial), flushes
    // it to disk and renames it over `path` only when everything was written. On any failure
    // (a producer's exception, a full disk, an unwritable directory) the temporary file is
    // removed, `path` is left as it was, and the error is rethrown (IoError naming the file and
    // errno's text for I/O).
    void write_streamed(const std::string& path, const TensorProducer& produce) const;
    // Writes to `path` via a temporary file and rename, so a crash never leaves half a file.
    void write(const std::string& path) const;

  private:
    struct PendingTensor {
        std::string name;
        tensor::Type type;
        std::vector<std::int64_t> dims;
        std::vector<std::uint8_t> data;
        bool streamed = false;  // data comes from write_streamed's producer
    };
    void check_new_tensor(const std::string& name, const std::vector<std::int64_t>& dims) const;
    std::size_t expected_bytes(const PendingTensor& t) const;
    std::vector<std::uint8_t> header_bytes() const;
    std::uint64_t alignment() const;

    std::uint32_t version_;
    std::vector<std::pair<std::string, Value>> metadata_;
    std::vector<PendingTensor> tensors_;
};

}  // namespace tokenscope::gguf
