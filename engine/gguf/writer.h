#pragma once
// Writes GGUF v3 (or v2) files: metadata in insertion order, tensor infos, and tensor data
// each padded to the alignment (general.alignment when set, else 32).
#include <cstdint>
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

    std::vector<std::uint8_t> to_bytes() const;
    // Writes to `path` via a temporary file and rename, so a crash never leaves half a file.
    void write(const std::string& path) const;

  private:
    struct PendingTensor {
        std::string name;
        tensor::Type type;
        std::vector<std::int64_t> dims;
        std::vector<std::uint8_t> data;
    };
    std::uint64_t alignment() const;

    std::uint32_t version_;
    std::vector<std::pair<std::string, Value>> metadata_;
    std::vector<PendingTensor> tensors_;
};

}  // namespace tokenscope::gguf
