// Fuzz target for the server's request parser (app/server/openai_request.h): any bytes as the
// body of /v1/chat/completions and /v1/completions must give parameters or an ApiError (a 400
// for the client), never a crash, a hang or another exception type escaping.
#include <cstdint>
#include <string_view>

#include "api_error.h"
#include "openai_request.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view body(reinterpret_cast<const char*>(data), size);
    for (auto endpoint : {tokenscope::server::Endpoint::ChatCompletions,
                          tokenscope::server::Endpoint::Completions}) {
        try {
            tokenscope::server::parse_completion_request(body, endpoint);
        } catch (const tokenscope::server::ApiError&) {
        }
    }
    return 0;
}
