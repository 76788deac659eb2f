#pragma once
// Builds GGUF bytes field by field, independently of gguf::Writer, so that validation tests
// can place a wrong value at a known offset.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace tokenscope::test {

class RawGguf {
  public:
    std::vector<std::uint8_t> bytes;

    std::size_t size() const { return bytes.size(); }
    template <typename T>
    std::size_t put(T value) {
        const std::size_t at = bytes.size();
        const auto* p = reinterpret_cast<const std::uint8_t*>(&value);
        bytes.insert(bytes.end(), p, p + sizeof(T));
        return at;
    }
    std::size_t put_string(const std::string& text) {
        const std::size_t at = put<std::uint64_t>(text.size());
        bytes.insert(bytes.end(), text.begin(), text.end());
        return at;
    }
    void pad_to(std::size_t alignment) {
        while (bytes.size() % alignment) bytes.push_back(0);
    }
    template <typename T>
    void patch(std::size_t at, T value) {
        std::memcpy(bytes.data() + at, &value, sizeof(T));
    }
};

}  // namespace tokenscope::test
