#pragma once
// Memory sizes as `tokenscope-cli inspect` and the desktop app's memory panel print them: one
// function, so that the same byte count reads the same in both ("22.4 GiB", not "24.1 GB" in
// one and "22.4 GiB" in the other). Binary units, because memory comes in powers of two and
// the system reports it in them (/proc/meminfo counts KiB). File sizes elsewhere keep decimal
// units. Header-only: it is a few lines and needs no build-list entry.
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <string>
#include <string_view>

namespace tokenscope::byte_format {

// What both programs call system_memory::available_bytes() (Linux: MemAvailable).
inline constexpr std::string_view kAvailableRamName = "available RAM";

// "17 B", "3.0 KiB", "512 MiB", "22.4 GiB", "1.5 TiB": one decimal below 100 of a unit, none
// from 100 on (three significant digits), and never "1024 MiB": a value that would round to
// 1024 of a unit is written in the next one.
inline std::string binary(std::uint64_t bytes) {
    static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    if (bytes < 1024) return std::to_string(bytes) + " B";
    double value = static_cast<double>(bytes);
    int unit = 0;
    while (value >= 1023.5 && unit + 1 < static_cast<int>(std::size(kUnits))) {
        value /= 1024.0;
        ++unit;
    }
    // 99.96 would print as "100.0": such values take the no-decimals form.
    const bool whole = value >= 99.95;
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, whole ? "%.0f %s" : "%.1f %s", value, kUnits[unit]);
    return buffer;
}

}  // namespace tokenscope::byte_format
