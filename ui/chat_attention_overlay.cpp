#include "chat_attention_overlay.h"

#include <QCoreApplication>
#include <QTextCursor>
#include <algorithm>
#include <numeric>

#include "message_document.h"

namespace tokenscope::ui {

namespace {
QString tr(const char* text) {
    return QCoreApplication::translate("tokenscope::ui::ChatAttentionOverlay", text);
}

QString percent(double share) {
    // No space before the sign: the legend must not wrap between a number and its unit.
    return QString::number(100.0 * share, 'f', share < 0.1 ? 1 : 0) + QLatin1Char('%');
}
}  // namespace

void ChatAttentionOverlay::setData(const AttentionData& data) {
    data_ = data;
    map_valid_ = false;
}

void ChatAttentionOverlay::clear() {
    setData({});
}

QString ChatAttentionOverlay::where() const {
    const QString head = data_.head < 0 ? tr("mean of heads") : tr("head %1").arg(data_.head);
    return tr("Layer %1, %2").arg(data_.layer).arg(head);
}

QString ChatAttentionOverlay::idleLegend() const {
    if (!hasData())
        return tr(
            "Attention is captured while the model answers: send a message or regenerate "
            "a reply, then hover its text.");
    return tr("Hover a token to see what it attends to (%1; choose in the Attention panel).")
        .arg(where());
}

QColor ChatAttentionOverlay::tintFor(const QColor& hue, float relative) {
    QColor c = hue;
    c.setAlpha(int(std::lround(36.0 + 204.0 * std::clamp(relative, 0.0f, 1.0f))));
    return c;
}

const AttentionTextMap& ChatAttentionOverlay::map(const MessageDocument& doc) {
    QVector<QString> texts;
    texts.reserve(doc.messageCount());
    for (int m = 0; m < doc.messageCount(); ++m) texts.push_back(doc.message(m).text);
    if (!map_valid_ || texts != mapped_texts_) {
        // The capture's reply is the transcript's last message when that is a streamed reply.
        AttentionTextMap::Reply reply;
        const int last = doc.messageCount() - 1;
        if (last >= 0 && doc.message(last).role == MessageRole::Assistant &&
            !doc.message(last).tokens.isEmpty()) {
            reply.message = last;
            for (const TokenData& t : doc.message(last).tokens) reply.tokens.push_back(t.text);
        }
        map_ = AttentionTextMap::fromData(data_, texts, reply);
        mapped_texts_ = std::move(texts);
        map_valid_ = true;
    }
    return map_;
}

int ChatAttentionOverlay::positionAt(const MessageDocument& doc, int doc_pos) {
    if (!hasData() || doc_pos < 0) return -1;
    int message = -1;
    const int offset = doc.textOffsetAt(doc_pos, &message);
    return offset < 0 ? -1 : map(doc).positionAt(message, offset);
}

ChatAttentionOverlay::View ChatAttentionOverlay::viewOf(const MessageDocument& doc, int q,
                                                        const QColor& tint, const QColor& focus) {
    View view;
    view.legend = idleLegend();
    if (!hasData() || q < 0) return view;
    const AttentionTextMap& m = map(doc);
    view.position = q;

    const auto add = [&](int position, const QTextCharFormat& format) {
        const auto span = m.span(position);
        if (!span) return;
        for (const auto& [from, to] : doc.textRanges(span->message, span->begin, span->end)) {
            QTextEdit::ExtraSelection s;
            s.cursor = QTextCursor(doc.document());
            s.cursor.setPosition(from);
            s.cursor.setPosition(to, QTextCursor::KeepAnchor);
            s.format = format;
            view.selections.push_back(s);
        }
    };
    const QString label = q < data_.labels.size() ? visiblePiece(data_.labels[q]) : QString();
    if (q >= data_.rows.size()) {
        view.legend = tr("‘%1’ (position %2) has no captured attention yet.").arg(label).arg(q);
        return view;
    }
    const QVector<float>& row = data_.rows[q];
    const int keys = int(std::min<qsizetype>(row.size(), q + 1));
    // Tints are relative to the strongest key that can be drawn: an attention sink on a
    // template token (often most of the weight) would otherwise leave the text nearly blank.
    float largest = 0.0f;
    double hidden = 0.0;
    for (int k = 0; k < keys; ++k) {
        if (!m.span(k))
            hidden += row[k];
        else if (k != q)
            largest = std::max(largest, row[k]);
    }
    // Strongest first, so that the cap keeps the keys that matter.
    QVector<int> order(keys);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return row[a] > row[b]; });
    int drawn = 0;
    for (int k : order) {
        if (drawn == kMaxTints || largest <= 0.0f || row[k] < kMinRelativeWeight * largest) break;
        if (k == q || !m.span(k)) continue;  // (a hidden key may exceed `largest`: skipped)
        QTextCharFormat f;
        f.setBackground(tintFor(tint, row[k] / largest));
        add(k, f);
        ++drawn;
    }
    QTextCharFormat hovered;
    hovered.setBackground(focus);
    hovered.setFontUnderline(true);
    add(q, hovered);

    QStringList strongest;
    for (int i = 0; i < std::min(3, keys); ++i) {
        const int k = order[i];
        const QString key = k < data_.labels.size() ? visiblePiece(data_.labels[k]) : QString();
        strongest << tr("‘%1’ %2").arg(key, percent(row[k]));
    }
    view.legend = tr("%1 · ‘%2’ (position %3) → %4 · %5 on text not shown here (template, "
                     "system prompt)")
                      .arg(where(), label)
                      .arg(q)
                      .arg(strongest.join(QStringLiteral(", ")), percent(hidden));
    return view;
}

}  // namespace tokenscope::ui
