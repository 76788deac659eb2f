#include "message_document.h"

#include <QFontDatabase>
#include <QTextBlock>
#include <QTextCursor>
#include <QTextDocument>
#include <algorithm>
#include <cmath>

namespace tokenscope::ui {

namespace {

QColor mix(const QColor& a, const QColor& b, double t) {
    return QColor::fromRgbF(float(a.redF() * (1 - t) + b.redF() * t),
                            float(a.greenF() * (1 - t) + b.greenF() * t),
                            float(a.blueF() * (1 - t) + b.blueF() * t));
}

// A line that opens or closes a fenced code block: up to three spaces, then ``` (CommonMark).
bool isFenceLine(const QString& line) {
    int i = 0;
    while (i < line.size() && i < 3 && line[i] == u' ') ++i;
    return line.mid(i, 3) == QLatin1String("```");
}

QString roleTitle(MessageRole role) {
    switch (role) {
        case MessageRole::System:
            return MessageDocument::tr("System prompt");
        case MessageRole::User:
            return MessageDocument::tr("You");
        case MessageRole::Assistant:
            return MessageDocument::tr("Assistant");
    }
    return {};
}

}  // namespace

QString visiblePiece(const QString& piece) {
    QString out;
    out.reserve(piece.size());
    for (const QChar c : piece) {
        if (c == u' ')
            out += QChar(0x00B7);
        else if (c == u'\n')
            out += QChar(0x21B5);
        else if (c == u'\t')
            out += QChar(0x2192);
        else
            out += c;
    }
    return out;
}

QString formatProbability(double p) {
    const double percent = p * 100.0;
    if (percent >= 10.0 || percent == 0.0) return QString::number(percent, 'f', 1) + u'%';
    if (percent >= 0.1) return QString::number(percent, 'f', 2) + u'%';
    return QString::number(percent, 'g', 2) + u'%';
}

MessageDocument::MessageDocument(QObject* parent) : QObject(parent), doc_(new QTextDocument(this)) {
    // Undo history would keep every streamed token twice and slow each insertion down.
    doc_->setUndoRedoEnabled(false);
    doc_->setDocumentMargin(12);
    setPalette(QPalette());
}

MessageDocument::~MessageDocument() = default;

QFont MessageDocument::codeFont(const QFont& base) {
    QFont f = QFontDatabase::systemFont(QFontDatabase::FixedFont);
    f.setPointSizeF(base.pointSizeF() > 0 ? base.pointSizeF() * 0.95 : f.pointSizeF());
    return f;
}

QColor MessageDocument::probabilityTint(float p) {
    if (!(p >= 0.0f)) p = 0.0f;  // NaN counts as "unlikely", never as "fine"
    const double q = std::round(std::min(p, 1.0f) * 20.0) / 20.0;
    QColor c = QColor::fromHsvF(float(q / 3.0), 0.85f, 0.95f);  // hue 0 (red) .. 1/3 (green)
    c.setAlphaF(float(0.62 * (1.0 - q)));
    return c;
}

void MessageDocument::setPalette(const QPalette& palette) {
    palette_ = palette;
    // Looked up once here, not per inserted token: the font database query is not free.
    const QFont code = codeFont(doc_->defaultFont());
    code_families_ = QStringList{code.family()};
    code_point_size_ = code.pointSizeF();
    rebuild();
}

QTextBlockFormat MessageDocument::blockFormat(const Entry& entry, bool code) const {
    QTextBlockFormat f;
    f.setLineHeight(code ? 100 : 115, QTextBlockFormat::ProportionalHeight);
    if (code) {
        f.setBackground(mix(palette_.color(QPalette::Base), palette_.color(QPalette::Text), 0.07));
        f.setLeftMargin(10);
        f.setRightMargin(10);
    } else if (entry.msg.role == MessageRole::User) {
        // User turns sit on a faint highlight band, so the two voices are told apart at a glance.
        f.setBackground(
            mix(palette_.color(QPalette::Base), palette_.color(QPalette::Highlight), 0.08));
        // Margins lie inside the painted background: this insets the text within the band.
        f.setLeftMargin(6);
        f.setRightMargin(6);
    }
    return f;
}

QTextCharFormat MessageDocument::bodyFormat(const Entry& entry, bool code, int token) const {
    QTextCharFormat f;
    if (code) {
        f.setFontFamilies(code_families_);
        f.setFontFixedPitch(true);
        f.setFontPointSize(code_point_size_);
        if (entry.line_is_fence)
            f.setForeground(
                mix(palette_.color(QPalette::Text), palette_.color(QPalette::Base), 0.45));
    }
    if (entry.msg.role == MessageRole::System) {
        f.setFontItalic(true);
        f.setForeground(mix(palette_.color(QPalette::Text), palette_.color(QPalette::Base), 0.4));
    }
    if (token >= 0) {
        if (color_by_probability_)
            f.setBackground(probabilityTint(entry.msg.tokens[token].probability));
        if (show_boundaries_) {
            // Alternating colours make adjacent tokens distinguishable without adding
            // characters, so positions and copy/paste stay exact.
            f.setUnderlineStyle(QTextCharFormat::SingleUnderline);
            f.setUnderlineColor(token % 2 == 0 ? palette_.color(QPalette::Highlight)
                                               : mix(palette_.color(QPalette::Text),
                                                     palette_.color(QPalette::Base), 0.35));
        }
    }
    return f;
}

void MessageDocument::insertHeader(QTextCursor& cursor, Entry& entry) {
    QTextBlockFormat header;
    header.setTopMargin(entries_.size() > 1 ? 14 : 0);
    header.setBottomMargin(3);
    QTextCharFormat title;
    title.setFontWeight(QFont::DemiBold);
    title.setFontPointSize(doc_->defaultFont().pointSizeF() * 0.85);
    title.setForeground(mix(palette_.color(QPalette::Text), palette_.color(QPalette::Base), 0.4));
    if (doc_->isEmpty()) {
        cursor.setBlockFormat(header);
        cursor.setBlockCharFormat(title);
    } else {
        cursor.insertBlock(header, title);
    }
    entry.header_start = cursor.position();
    cursor.insertText(roleTitle(entry.msg.role), title);
    cursor.insertBlock(blockFormat(entry, false), bodyFormat(entry, false, -1));
    entry.body_start = entry.body_end = cursor.position();
}

void MessageDocument::insertBodyText(QTextCursor& cursor, Entry& entry, const QString& text,
                                     int token) {
    if (token >= 0) entry.token_starts.push_back(cursor.position());
    qsizetype i = 0;
    for (;;) {
        const qsizetype nl = text.indexOf(u'\n', i);
        const QString segment = text.mid(i, (nl < 0 ? text.size() : nl) - i);
        if (!segment.isEmpty()) {
            const qsizetype before = entry.line.size();
            entry.line += segment;
            if (!entry.line_is_fence && before < 6 && isFenceLine(entry.line)) {
                entry.line_is_fence = true;
                if (!entry.in_code) {
                    // The line turned out to open a code block only now (the backticks may have
                    // come in earlier tokens): restyle what is already on it.
                    QTextCursor line(cursor);
                    line.setBlockFormat(blockFormat(entry, true));
                    line.setPosition(cursor.block().position());
                    line.setPosition(cursor.position(), QTextCursor::KeepAnchor);
                    QTextCharFormat code = bodyFormat(entry, true, -1);
                    line.mergeCharFormat(code);
                }
            }
            cursor.insertText(segment,
                              bodyFormat(entry, entry.in_code || entry.line_is_fence, token));
        }
        if (nl < 0) break;
        if (entry.line_is_fence) entry.in_code = !entry.in_code;
        entry.line.clear();
        entry.line_is_fence = false;
        cursor.insertBlock(blockFormat(entry, entry.in_code),
                           bodyFormat(entry, entry.in_code, token));
        i = nl + 1;
    }
    entry.body_end = cursor.position();
}

void MessageDocument::insertNote(QTextCursor& cursor, const Entry& entry) {
    if (entry.msg.note.isEmpty()) return;
    QTextBlockFormat block;
    block.setTopMargin(2);
    QTextCharFormat note;
    note.setFontPointSize(doc_->defaultFont().pointSizeF() * 0.85);
    note.setFontItalic(true);
    note.setForeground(mix(palette_.color(QPalette::Text), palette_.color(QPalette::Base), 0.45));
    cursor.insertBlock(block, note);
    cursor.insertText(entry.msg.note, note);
}

void MessageDocument::setMessageNote(int index, const QString& note) {
    if (index < 0 || index >= entries_.size() || entries_[index].msg.note == note) return;
    const bool append = index == entries_.size() - 1 && entries_[index].msg.note.isEmpty() &&
                        !(streaming_ && index == entries_.size() - 1);
    entries_[index].msg.note = note;
    if (!append) {
        rebuild();
        return;
    }
    QTextCursor cursor(doc_);
    cursor.movePosition(QTextCursor::End);
    cursor.beginEditBlock();
    insertNote(cursor, entries_[index]);
    cursor.endEditBlock();
}

int MessageDocument::addMessage(MessageRole role, const QString& text) {
    if (streaming_) finishAssistantMessage();
    Entry entry;
    entry.msg.role = role;
    entry.msg.text = text;
    entries_.push_back(entry);
    Entry& e = entries_.back();
    QTextCursor cursor(doc_);
    cursor.movePosition(QTextCursor::End);
    cursor.beginEditBlock();
    insertHeader(cursor, e);
    insertBodyText(cursor, e, text, -1);
    cursor.endEditBlock();
    return int(entries_.size()) - 1;
}

int MessageDocument::beginAssistantMessage() {
    const int index = addMessage(MessageRole::Assistant, {});
    streaming_ = true;
    return index;
}

void MessageDocument::appendTokens(std::span<const TokenData> tokens) {
    if (tokens.empty()) return;
    if (!streaming_) beginAssistantMessage();
    Entry& e = entries_.back();
    QTextCursor cursor(doc_);
    cursor.movePosition(QTextCursor::End);
    cursor.beginEditBlock();
    for (const TokenData& t : tokens) {
        e.msg.tokens.push_back(t);
        e.msg.text += t.text;
        insertBodyText(cursor, e, t.text, int(e.msg.tokens.size()) - 1);
    }
    cursor.endEditBlock();
}

void MessageDocument::finishAssistantMessage() {
    streaming_ = false;
}

void MessageDocument::setMessages(const QVector<ChatMessage>& messages) {
    streaming_ = false;
    entries_.clear();
    entries_.reserve(messages.size());
    for (const ChatMessage& m : messages) {
        Entry e;
        e.msg = m;
        if (!m.tokens.isEmpty()) {
            e.msg.text.clear();
            for (const TokenData& t : m.tokens) e.msg.text += t.text;
        }
        entries_.push_back(e);
    }
    rebuild();
}

void MessageDocument::clear() {
    streaming_ = false;
    entries_.clear();
    doc_->clear();
}

void MessageDocument::rebuild() {
    const QVector<Entry> old = std::move(entries_);
    entries_.clear();
    doc_->clear();
    QTextCursor cursor(doc_);
    cursor.beginEditBlock();
    for (const Entry& o : old) {
        Entry e;
        e.msg.role = o.msg.role;
        e.msg.text = o.msg.text;
        e.msg.tokens = o.msg.tokens;
        e.msg.note = o.msg.note;
        entries_.push_back(e);
        Entry& n = entries_.back();
        insertHeader(cursor, n);
        if (n.msg.tokens.isEmpty()) {
            insertBodyText(cursor, n, n.msg.text, -1);
        } else {
            for (int t = 0; t < n.msg.tokens.size(); ++t)
                insertBodyText(cursor, n, n.msg.tokens[t].text, t);
        }
        insertNote(cursor, n);
    }
    cursor.endEditBlock();
}

void MessageDocument::restyleTokens() {
    QTextCursor cursor(doc_);
    cursor.beginEditBlock();
    for (const Entry& e : entries_) {
        for (int t = 0; t < e.token_starts.size(); ++t) {
            const int start = e.token_starts[t];
            const int end = t + 1 < e.token_starts.size() ? e.token_starts[t + 1] : e.body_end;
            if (start >= end) continue;
            QTextCharFormat f;
            f.setBackground(color_by_probability_
                                ? QBrush(probabilityTint(e.msg.tokens[t].probability))
                                : QBrush(Qt::NoBrush));
            if (show_boundaries_) {
                f.setUnderlineStyle(QTextCharFormat::SingleUnderline);
                f.setUnderlineColor(t % 2 == 0 ? palette_.color(QPalette::Highlight)
                                               : mix(palette_.color(QPalette::Text),
                                                     palette_.color(QPalette::Base), 0.35));
            } else {
                f.setUnderlineStyle(QTextCharFormat::NoUnderline);
            }
            cursor.setPosition(start);
            cursor.setPosition(end, QTextCursor::KeepAnchor);
            cursor.mergeCharFormat(f);
        }
    }
    cursor.endEditBlock();
}

void MessageDocument::setColorByProbability(bool on) {
    if (on == color_by_probability_) return;
    color_by_probability_ = on;
    restyleTokens();
}

void MessageDocument::setShowTokenBoundaries(bool on) {
    if (on == show_boundaries_) return;
    show_boundaries_ = on;
    restyleTokens();
}

int MessageDocument::messageAtPosition(int pos) const {
    if (entries_.isEmpty() || pos < entries_.front().header_start) return -1;
    const auto it = std::upper_bound(entries_.begin(), entries_.end(), pos,
                                     [](int p, const Entry& e) { return p < e.header_start; });
    const int m = int(it - entries_.begin()) - 1;
    return pos <= entries_[m].body_end ? m : -1;
}

TokenRef MessageDocument::tokenAtPosition(int pos) const {
    const int m = messageAtPosition(pos);
    if (m < 0) return {};
    const Entry& e = entries_[m];
    if (pos < e.body_start || pos >= e.body_end || e.token_starts.isEmpty()) return {};
    const auto it = std::upper_bound(e.token_starts.begin(), e.token_starts.end(), pos);
    if (it == e.token_starts.begin()) return {};
    return {m, int(it - e.token_starts.begin()) - 1};
}

QPair<int, int> MessageDocument::tokenRange(TokenRef ref) const {
    if (ref.message < 0 || ref.message >= entries_.size()) return {-1, -1};
    const Entry& e = entries_[ref.message];
    if (ref.token < 0 || ref.token >= e.token_starts.size()) return {-1, -1};
    const int end =
        ref.token + 1 < e.token_starts.size() ? e.token_starts[ref.token + 1] : e.body_end;
    return {e.token_starts[ref.token], end};
}

QPair<int, int> MessageDocument::messageBodyRange(int message) const {
    if (message < 0 || message >= entries_.size()) return {-1, -1};
    return {entries_[message].body_start, entries_[message].body_end};
}

}  // namespace tokenscope::ui
