// Fuzz entry point: any byte string must either parse into a File whose every tensor lies
// inside the input, or be rejected with tokenscope::Error. Anything else (a crash, a
// sanitizer report, another exception type, a hang) is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "gguf/file.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    try {
        const auto file = tokenscope::gguf::File::parse("fuzz-input", std::span(data, size));
        // Touch everything the reader promises so sanitizers see any bad pointer.
        std::uint64_t sum = 0;
        for (const auto& t : file.tensors()) {
            if (t.byte_size > 0) sum += t.data[0] + t.data[t.byte_size - 1];
            if (t.data < data || t.data + t.byte_size > data + size) std::abort();
        }
        for (const auto& [key, value] : file.metadata())
            sum += key.size() + value.to_display_string().size();
        if (sum == 0xFFFFFFFFFFFFFFFFull) std::abort();  // keeps the reads from being optimised out
    } catch (const tokenscope::Error&) {
        // Rejected with a message: the expected outcome for malformed input.
    }
    return 0;
}
