#pragma once
// Numbers as the panels print them. Digits are grouped with a no-break space ("18 432") so a
// number never wraps across lines; byte sizes use decimal units (1 MB = 10^6 B), like the
// hand arithmetic of the KV formula and the sizes other tools print for the same files.
#include <QString>

namespace tokenscope::ui {

QString group_digits(qint64 value);
QString format_bytes(double bytes);

}  // namespace tokenscope::ui
