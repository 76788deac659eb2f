#include "number_format.h"

#include <array>

#include "util/byte_format.h"

namespace tokenscope::ui {

QString group_digits(qint64 value) {
    QString digits = QString::number(value < 0 ? -value : value);
    for (int i = int(digits.size()) - 3; i > 0; i -= 3) digits.insert(i, QChar(0x00A0));
    return value < 0 ? QStringLiteral("-") + digits : digits;
}

QString format_bytes(double bytes) {
    static const std::array<const char*, 5> units = {"B", "kB", "MB", "GB", "TB"};
    int u = 0;
    while (bytes >= 1000.0 && u + 1 < int(units.size())) {
        bytes /= 1000.0;
        ++u;
    }
    const int decimals = u == 0 ? 0 : (bytes >= 100.0 ? 0 : 1);
    return QString::number(bytes, 'f', decimals) + QChar(0x00A0) + QLatin1String(units[u]);
}

QString format_binary_bytes(quint64 bytes) {
    // The CLI's string with its one space made unbreakable: a label never wraps "22.4 | GiB".
    return QString::fromStdString(byte_format::binary(bytes)).replace(u' ', QChar(0x00A0));
}

QString available_ram_name() {
    return QString::fromUtf8(byte_format::kAvailableRamName.data(),
                             qsizetype(byte_format::kAvailableRamName.size()));
}

}  // namespace tokenscope::ui
