#pragma once
// This machine's physical memory, for the memory budgets of `inspect` and the desktop app.
#include <cstdint>

namespace tokenscope::system_memory {

// Installed physical memory in bytes; 0 when the system does not say.
std::uint64_t physical_bytes();

// What a new allocation can get without swapping: Linux's MemAvailable, Windows' available
// physical memory; physical_bytes() where the system gives no such number.
std::uint64_t available_bytes();

}  // namespace tokenscope::system_memory
