#include "util/system_memory.h"

#ifdef _WIN32
#include "util/windows_api.h"
#else
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#endif

namespace tokenscope::system_memory {

#ifdef _WIN32

namespace {
// Both numbers from one call; false when Windows does not answer.
bool memory_status(MEMORYSTATUSEX& status) {
    status = {};
    status.dwLength = sizeof status;
    return GlobalMemoryStatusEx(&status) != 0;
}
}  // namespace

std::uint64_t physical_bytes() {
    MEMORYSTATUSEX status;
    return memory_status(status) ? static_cast<std::uint64_t>(status.ullTotalPhys) : 0;
}

std::uint64_t available_bytes() {
    MEMORYSTATUSEX status;
    return memory_status(status) ? static_cast<std::uint64_t>(status.ullAvailPhys) : 0;
}

#else

std::uint64_t physical_bytes() {
    const long pages = ::sysconf(_SC_PHYS_PAGES);
    const long page_size = ::sysconf(_SC_PAGESIZE);
    return pages > 0 && page_size > 0
               ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page_size)
               : 0;
}

std::uint64_t available_bytes() {
    // "MemAvailable:   123456 kB"; a line that does not parse counts as 0.
    std::ifstream meminfo("/proc/meminfo");
    for (std::string line; std::getline(meminfo, line);) {
        if (line.rfind("MemAvailable:", 0) == 0) {
            std::uint64_t kib = 0;
            std::istringstream(line.substr(13)) >> kib;
            return kib * 1024;
        }
    }
    return physical_bytes();
}

#endif

}  // namespace tokenscope::system_memory
