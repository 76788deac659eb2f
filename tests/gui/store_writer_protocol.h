#pragma once
// What store_writer writes, shared with the test that kills it so both agree on every byte.
#include <QString>

namespace tokenscope::test::store_writer {

// Message i of a run: varied lengths (every tenth is ~24 KB, spanning several pages, so a kill
// can land inside a multi-page commit) and text beyond the BMP.
inline QString content(int run, int i) {
    QString text = QStringLiteral("run %1 message %2: ").arg(run).arg(i);
    const int repeats = (i % 10 == 9) ? 1000 : (i % 7) + 1;
    for (int r = 0; r < repeats; ++r) text += QStringLiteral("héllo wörld 🌍 日本語 שלום ");
    return text;
}

// Odd messages are assistant answers: first saved partial (as on Stop), then completed.
inline bool is_answer(int i) {
    return i % 2 == 1;
}

inline QString partial(int run, int i) {
    const QString full = content(run, i);
    return full.left(full.size() / 2);
}

}  // namespace tokenscope::test::store_writer
