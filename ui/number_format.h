#pragma once
// Numbers as the panels print them. Digits are grouped with a no-break space ("18 432") so a
// number never wraps across lines; byte sizes use decimal units (1 MB = 10^6 B), like the
// hand arithmetic of the KV formula and the sizes other tools print for the same files.
// Memory measured against RAM or GPU memory (the memory budget panel) uses binary units
// instead, through the same function as `tokenscope-cli inspect` (util/byte_format.h).
#include <QString>

namespace tokenscope::ui {

QString group_digits(qint64 value);
QString format_bytes(double bytes);
// byte_format::binary(bytes) ("22.4 GiB") with a no-break space before the unit.
QString format_binary_bytes(quint64 bytes);
// What the panels call system_memory::available_bytes(): "available RAM", as the CLI does.
QString available_ram_name();

}  // namespace tokenscope::ui
