#include "util/error.h"

#include <system_error>

#ifdef _WIN32
#include "util/windows_api.h"
#endif

namespace tokenscope {

std::string system_error_text(int errnum) {
    return std::generic_category().message(errnum);
}

#ifdef _WIN32
std::string windows_error_text(unsigned long code) {
    char* buffer = nullptr;
    const DWORD length = FormatMessageA(
        FORMAT_MESSAGE_ALLOCATE_BUFFER | FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS |
            FORMAT_MESSAGE_MAX_WIDTH_MASK,
        nullptr, code, 0, reinterpret_cast<char*>(&buffer), 0, nullptr);
    std::string text = buffer ? std::string(buffer, length) : std::string();
    if (buffer) LocalFree(buffer);
    for (char& c : text) {
        if (c == '\r' || c == '\n') c = ' ';
    }
    while (!text.empty() && (text.back() == ' ' || text.back() == '.')) text.pop_back();
    if (text.empty()) text = "unknown error";
    return text + " (error " + std::to_string(code) + ")";
}
#endif

}  // namespace tokenscope
