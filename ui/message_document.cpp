#include "message_document.h"

#include <QFontDatabase>
#include <QTextBlock>
#include <QTextCursor>
#include <QTextDocument>
#include <QUrl>
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

// The scheme of a fold header's link; the path is the message index.
constexpr QLatin1StringView kThinkScheme("tokenscope-think");
constexpr QLatin1StringView kCopyScheme("tokenscope-copy");
constexpr QLatin1StringView kCopyTextScheme("tokenscope-copy-text");
constexpr QLatin1StringView kVersionScheme("tokenscope-version");

// The message index a link of `scheme` carries as its path; -1 for other links.
int linkMessage(const QUrl& link, QLatin1StringView scheme) {
    if (link.scheme() != scheme) return -1;
    bool ok = false;
    const int m = link.path().toInt(&ok);
    return ok ? m : -1;
}

QString tokenCount(int n) {
    return n == 1 ? MessageDocument::tr("1 token") : MessageDocument::tr("%1 tokens").arg(n);
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
        f.setProperty(kCodeBlockProperty, true);
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
        setTokenUnderline(f, entry.msg.tokens[token], token);
    }
    return f;
}

QColor MessageDocument::acceptedGuessColor() {
    // A teal that reads on light and dark bases and is not one of the probability tints.
    return QColor(0x12, 0x9c, 0x94);
}

void MessageDocument::setTokenUnderline(QTextCharFormat& f, const TokenData& t, int token) const {
    if (show_boundaries_) {
        // Alternating colours make adjacent tokens distinguishable without adding
        // characters, so positions and copy/paste stay exact. The user asked for boundaries:
        // they take the underline over the speculation marking.
        f.setUnderlineStyle(QTextCharFormat::SingleUnderline);
        f.setUnderlineColor(token % 2 == 0 ? palette_.color(QPalette::Highlight)
                                           : mix(palette_.color(QPalette::Text),
                                                 palette_.color(QPalette::Base), 0.35));
    } else if (t.origin == TokenOrigin::Accepted) {
        // A guess the model accepted: it cost no decode pass of its own.
        f.setUnderlineStyle(QTextCharFormat::SingleUnderline);
        f.setUnderlineColor(acceptedGuessColor());
    } else {
        f.setUnderlineStyle(QTextCharFormat::NoUnderline);
    }
}

QTextCharFormat MessageDocument::thinkingFormat(const Entry& entry, int token) const {
    QTextCharFormat f = bodyFormat(entry, false, token);
    f.setFontItalic(true);
    f.setForeground(mix(palette_.color(QPalette::Text), palette_.color(QPalette::Base), 0.42));
    return f;
}

QTextBlockFormat MessageDocument::thinkingBlockFormat() const {
    QTextBlockFormat f;
    f.setLineHeight(110, QTextBlockFormat::ProportionalHeight);
    // A faint band, inset like the user turns, marks where the reasoning ends and the answer
    // begins.
    f.setBackground(mix(palette_.color(QPalette::Base), palette_.color(QPalette::Text), 0.035));
    f.setLeftMargin(10);
    f.setRightMargin(6);
    return f;
}

QTextCharFormat MessageDocument::foldFormat(int index) const {
    QTextCharFormat f;
    f.setAnchor(true);
    f.setAnchorHref(QString(kThinkScheme) + u':' + QString::number(index));
    f.setFontPointSize(doc_->defaultFont().pointSizeF() * 0.92);
    f.setForeground(mix(palette_.color(QPalette::Text), palette_.color(QPalette::Base), 0.35));
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
}

void MessageDocument::insertThinkingText(QTextCursor& cursor, Entry& entry, const QString& text,
                                         int token) {
    // No code blocks inside the reasoning: it is shown as a quiet aside, and fence state left
    // open by it must not leak into the answer.
    const QTextCharFormat format = thinkingFormat(entry, token);
    qsizetype i = 0;
    for (;;) {
        const qsizetype nl = text.indexOf(u'\n', i);
        const QString segment = text.mid(i, (nl < 0 ? text.size() : nl) - i);
        if (!segment.isEmpty()) cursor.insertText(segment, format);
        if (nl < 0) break;
        cursor.insertBlock(thinkingBlockFormat(), format);
        i = nl + 1;
    }
}

void MessageDocument::insertFoldHeader(QTextCursor& cursor, int index) {
    Entry& e = entries_[index];
    QTextBlockFormat block;
    block.setTopMargin(2);
    block.setBottomMargin(4);
    cursor.setBlockFormat(block);
    e.fold_label = foldLabel(e);
    e.fold_start = cursor.position();
    cursor.insertText(e.fold_label, foldFormat(index));
    e.fold_end = cursor.position();
}

QString MessageDocument::foldLabel(const Entry& e) const {
    int tokens = -1;  // unknown for a message restored without its tokens
    if (!e.token_offsets.isEmpty()) {
        // Tokens between the tags; while the section is open, not those held back as a
        // possible "</think>".
        const int end = e.think.closeTagBegin() >= 0 ? e.think.closeTagBegin() : e.think.decided();
        tokens = int(std::lower_bound(e.token_offsets.begin(), e.token_offsets.end(), end) -
                     std::lower_bound(e.token_offsets.begin(), e.token_offsets.end(),
                                      e.think.sectionBegin()));
    }
    QString what;
    if (e.think.closeTagBegin() >= 0)
        what = tokens >= 0 ? tr("Thought for %1").arg(tokenCount(tokens)) : tr("Thoughts");
    else if (!e.think.complete())
        what = tokens >= 0 ? tr("Thinking… (%1)").arg(tokenCount(tokens)) : tr("Thinking…");
    else  // the reply ended inside its reasoning (stopped, or out of tokens)
        what = tokens >= 0 ? tr("Thinking stopped after %1").arg(tokenCount(tokens))
                           : tr("Thinking stopped");
    return (e.think_expanded ? QStringLiteral("▾ ") : QStringLiteral("▸ ")) + what;
}

void MessageDocument::insertDecided(QTextCursor& cursor, int index) {
    Entry& e = entries_[index];
    const int decided = e.think.decided();
    // A token's start is recorded when its first shown character goes in. The fold header
    // belongs to no token; the line break that starts the reasoning or the answer belongs to
    // the (hidden) tokens before it, so that shown tokens span exactly their text.
    auto record = [&](int offset) {
        while (e.token_starts.size() < e.token_offsets.size() &&
               e.token_offsets[e.token_starts.size()] <= offset)
            e.token_starts.push_back(cursor.position());
    };
    while (e.laid_out < decided) {
        const int from = e.laid_out;
        const ThinkSplitter::Part part = e.think.partAt(from);
        // A run: one part, one token (its format), all decided.
        int token = -1;
        int to = decided;
        if (!e.token_offsets.isEmpty()) {
            token = int(std::upper_bound(e.token_offsets.begin(), e.token_offsets.end(), from) -
                        e.token_offsets.begin()) -
                    1;
            if (token + 1 < e.token_offsets.size())
                to = std::min(to, int(e.token_offsets[token + 1]));
        }
        int end = from + 1;
        while (end < to && e.think.partAt(end) == part) ++end;
        e.laid_out = end;
        const QString text = e.msg.text.mid(from, end - from);
        if (part == ThinkSplitter::Part::Thinking) {
            if (e.fold_start < 0) insertFoldHeader(cursor, index);
            if (!e.think_expanded) continue;
            if (!e.thinking_shown) {
                record(from - 1);
                cursor.insertBlock(thinkingBlockFormat(), thinkingFormat(e, -1));
                e.thinking_shown = true;
            }
            record(from);
            insertThinkingText(cursor, e, text, token);
        } else if (part == ThinkSplitter::Part::Answer) {
            if (!e.answer_begun && e.fold_start >= 0) {
                record(from - 1);
                QTextBlockFormat block = blockFormat(e, false);
                if (e.thinking_shown) block.setTopMargin(6);  // clear of the reasoning's band
                cursor.insertBlock(block, bodyFormat(e, false, -1));
            }
            e.answer_begun = true;
            record(from);
            insertBodyText(cursor, e, text, token);
        }
    }
    // Tokens with nothing shown after them (a reply that ends in folded reasoning or a tag).
    if (e.think.complete() && e.laid_out == e.msg.text.size()) record(int(e.msg.text.size()));
    e.body_end = cursor.position();
}

void MessageDocument::renderMore(int index) {
    Entry& e = entries_[index];
    QTextCursor cursor(doc_);
    cursor.beginEditBlock();
    if (e.think.restarted()) {
        rerenderBody(index);
    } else {
        const int old_end = e.body_end;
        cursor.setPosition(e.body_end);
        insertDecided(cursor, index);
        shiftEntriesAfter(index, e.body_end - old_end);
    }
    refreshFoldHeader(index);
    cursor.endEditBlock();
}

void MessageDocument::rerenderBody(int index) {
    Entry& e = entries_[index];
    QTextCursor cursor(doc_);
    cursor.beginEditBlock();
    const int old_end = e.body_end;
    cursor.setPosition(e.body_start);
    cursor.setPosition(e.body_end, QTextCursor::KeepAnchor);
    cursor.removeSelectedText();
    // What is left is one empty block; it may have kept the format of a header or code line.
    cursor.setBlockFormat(blockFormat(e, false));
    cursor.setBlockCharFormat(bodyFormat(e, false, -1));
    e.token_starts.clear();
    e.laid_out = 0;
    e.in_code = e.line_is_fence = false;
    e.line.clear();
    e.thinking_shown = e.answer_begun = false;
    e.fold_start = e.fold_end = -1;
    e.fold_label.clear();
    e.body_end = e.body_start;
    insertDecided(cursor, index);
    shiftEntriesAfter(index, e.body_end - old_end);
    cursor.endEditBlock();
}

void MessageDocument::refreshFoldHeader(int index) {
    Entry& e = entries_[index];
    if (e.fold_start < 0) return;
    const QString label = foldLabel(e);
    if (label == e.fold_label) return;
    QTextCursor cursor(doc_);
    cursor.setPosition(e.fold_start);
    cursor.setPosition(e.fold_end, QTextCursor::KeepAnchor);
    cursor.insertText(label, foldFormat(index));
    const int delta = int(label.size() - e.fold_label.size());
    e.fold_label = label;
    e.fold_end += delta;
    e.body_end += delta;
    for (int& start : e.token_starts) start += delta;  // none lies before the header's end
    shiftEntriesAfter(index, delta);
}

void MessageDocument::shiftEntriesAfter(int index, int delta) {
    if (delta == 0) return;
    for (qsizetype i = index + 1; i < entries_.size(); ++i) {
        Entry& e = entries_[i];
        e.header_start += delta;
        e.body_start += delta;
        e.body_end += delta;
        if (e.fold_start >= 0) {
            e.fold_start += delta;
            e.fold_end += delta;
        }
        for (int& start : e.token_starts) start += delta;
    }
}

bool MessageDocument::hasThinking(int message) const {
    return message >= 0 && message < entries_.size() && entries_[message].fold_start >= 0;
}

bool MessageDocument::thinkingExpanded(int message) const {
    return hasThinking(message) && entries_[message].think_expanded;
}

void MessageDocument::setThinkingExpanded(int message, bool expanded) {
    if (!hasThinking(message) || entries_[message].think_expanded == expanded) return;
    entries_[message].think_expanded = expanded;
    rerenderBody(message);
}

QPair<int, int> MessageDocument::thinkingHeaderRange(int message) const {
    if (!hasThinking(message)) return {-1, -1};
    return {entries_[message].fold_start, entries_[message].fold_end};
}

int MessageDocument::thinkingHeaderAt(int pos) const {
    const int m = messageAtPosition(pos);
    if (!hasThinking(m)) return -1;
    return pos >= entries_[m].fold_start && pos <= entries_[m].fold_end ? m : -1;
}

int MessageDocument::thinkingLinkMessage(const QUrl& link) {
    return linkMessage(link, kThinkScheme);
}

int MessageDocument::copyLinkMessage(const QUrl& link) {
    return linkMessage(link, kCopyScheme);
}

int MessageDocument::copyTextLinkMessage(const QUrl& link) {
    return linkMessage(link, kCopyTextScheme);
}

QPair<int, int> MessageDocument::versionLink(const QUrl& link) {
    if (link.scheme() != kVersionScheme) return {-1, 0};
    const QStringList parts = link.path().split(u':');
    bool ok_message = false, ok_step = false;
    const int message = parts.value(0).toInt(&ok_message);
    const int step = parts.value(1).toInt(&ok_step);
    if (!ok_message || !ok_step || (step != -1 && step != 1)) return {-1, 0};
    return {message, step};
}

QPair<int, int> MessageDocument::versionLinkRange(int message, int step) const {
    return anchorRange(QString(kVersionScheme) + u':' + QString::number(message) + u':' +
                       QString::number(step));
}

QPair<int, int> MessageDocument::anchorRange(const QString& href) const {
    for (QTextBlock b = doc_->begin(); b.isValid(); b = b.next()) {
        for (auto it = b.begin(); !it.atEnd(); ++it) {
            const QTextFragment f = it.fragment();
            if (f.isValid() && f.charFormat().anchorHref() == href)
                return {f.position(), f.position() + f.length()};
        }
    }
    return {-1, -1};
}

void MessageDocument::setMessageVersions(int index, int version, int versions) {
    if (index < 0 || index >= entries_.size()) return;
    ChatMessage& m = entries_[index].msg;
    if (m.version == version && m.versions == versions) return;
    m.version = version;
    m.versions = versions;
    rebuild();
}

QPair<int, int> MessageDocument::copyLinkRange(int message) const {
    return anchorRange(QString(kCopyScheme) + u':' + QString::number(message));
}

QPair<int, int> MessageDocument::copyTextLinkRange(int message) const {
    return anchorRange(QString(kCopyTextScheme) + u':' + QString::number(message));
}

QString MessageDocument::copyText(int message) const {
    if (message < 0 || message >= entries_.size()) return {};
    const ChatMessage& m = entries_[message].msg;
    if (m.role != MessageRole::Assistant) return m.text;
    ThinkSplitter parts;
    parts.advance(m.text, true);
    QString answer;
    for (int i = 0; i < m.text.size(); ++i) {
        if (parts.partAt(i) == ThinkSplitter::Part::Answer) answer += m.text[i];
    }
    return answer;
}

void MessageDocument::insertNote(QTextCursor& cursor, int index) {
    const Entry& entry = entries_[index];
    if (entry.msg.note.isEmpty()) return;
    QTextBlockFormat block;
    block.setTopMargin(2);
    QTextCharFormat note;
    note.setFontPointSize(doc_->defaultFont().pointSizeF() * 0.85);
    note.setFontItalic(true);
    note.setForeground(mix(palette_.color(QPalette::Text), palette_.color(QPalette::Base), 0.45));
    cursor.insertBlock(block, note);
    if (entry.msg.versions > 1) {
        // "‹ 2/3 ›": the arrows are links to the neighbouring versions (dimmed at the ends).
        const auto arrow = [&](const QString& glyph, int step, const QString& tip) {
            const int target = entry.msg.version + step;
            if (target < 1 || target > entry.msg.versions) {
                cursor.insertText(glyph, note);
                return;
            }
            QTextCharFormat link = note;
            link.setFontItalic(false);
            link.setFontWeight(QFont::Bold);
            link.setAnchor(true);
            link.setAnchorHref(QString(kVersionScheme) + u':' + QString::number(index) + u':' +
                               QString::number(step));
            link.setForeground(palette_.color(QPalette::Link));
            link.setToolTip(tip);
            cursor.insertText(glyph, link);
        };
        // Padded inside the links: a lone glyph of the note's small font is hard to hit.
        arrow(QStringLiteral(" \u2039 "), -1, tr("Show the previous version of this reply"));
        cursor.insertText(QStringLiteral("%1/%2").arg(entry.msg.version).arg(entry.msg.versions),
                          note);
        arrow(QStringLiteral(" \u203A "), +1, tr("Show the next version of this reply"));
        cursor.insertText(QStringLiteral(" \u00B7 "), note);
    }
    cursor.insertText(entry.msg.note + QStringLiteral(" \u00B7 "), note);
    // The reply's copy buttons: links, so they need no widget of their own in the transcript.
    const auto copy_link = [&](QLatin1StringView scheme, const QString& label, const QString& tip) {
        QTextCharFormat link = note;
        link.setFontItalic(false);
        link.setAnchor(true);
        link.setAnchorHref(QString(scheme) + u':' + QString::number(index));
        link.setForeground(palette_.color(QPalette::Link));
        link.setToolTip(tip);
        cursor.insertText(label, link);
    };
    copy_link(kCopyScheme, tr("Copy"),
              tr("Copy this reply as markdown, as the model wrote it (without its reasoning)"));
    cursor.insertText(QStringLiteral(" \u00B7 "), note);
    copy_link(kCopyTextScheme, tr("Copy as text"),
              tr("Copy this reply as plain text: markdown markers and code fences removed"));
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
    insertNote(cursor, index);
    cursor.endEditBlock();
}

MessageDocument::Entry MessageDocument::makeEntry(const ChatMessage& message) {
    Entry e;
    e.msg = message;
    e.think = ThinkSplitter(message.role == MessageRole::Assistant);
    if (!message.tokens.isEmpty()) {
        e.msg.text.clear();
        e.token_offsets.reserve(message.tokens.size());
        for (const TokenData& t : message.tokens) {
            e.token_offsets.push_back(int(e.msg.text.size()));
            e.msg.text += t.text;
        }
    }
    return e;
}

void MessageDocument::renderEntry(QTextCursor& cursor, int index, bool complete) {
    Entry& e = entries_[index];
    insertHeader(cursor, e);
    e.think.advance(e.msg.text, complete);
    insertDecided(cursor, index);
    insertNote(cursor, index);
}

int MessageDocument::appendEntry(MessageRole role, const QString& text, bool complete) {
    if (streaming_) finishAssistantMessage();
    ChatMessage message;
    message.role = role;
    message.text = text;
    entries_.push_back(makeEntry(message));
    const int index = int(entries_.size()) - 1;
    QTextCursor cursor(doc_);
    cursor.movePosition(QTextCursor::End);
    cursor.beginEditBlock();
    renderEntry(cursor, index, complete);
    cursor.endEditBlock();
    return index;
}

int MessageDocument::addMessage(MessageRole role, const QString& text) {
    return appendEntry(role, text, true);
}

int MessageDocument::beginAssistantMessage() {
    const int index = appendEntry(MessageRole::Assistant, {}, false);
    streaming_ = true;
    return index;
}

void MessageDocument::appendTokens(std::span<const TokenData> tokens) {
    if (tokens.empty()) return;
    if (!streaming_) beginAssistantMessage();
    const int index = int(entries_.size()) - 1;
    Entry& e = entries_[index];
    for (const TokenData& t : tokens) {
        e.token_offsets.push_back(int(e.msg.text.size()));
        e.msg.tokens.push_back(t);
        e.msg.text += t.text;
    }
    e.think.advance(e.msg.text, false);
    renderMore(index);
}

void MessageDocument::finishAssistantMessage() {
    if (!streaming_) return;
    streaming_ = false;
    // What was held back as a possible tag is now known not to be one.
    const int index = int(entries_.size()) - 1;
    entries_[index].think.advance(entries_[index].msg.text, true);
    renderMore(index);
}

void MessageDocument::setMessages(const QVector<ChatMessage>& messages) {
    streaming_ = false;
    entries_.clear();
    entries_.reserve(messages.size());
    for (const ChatMessage& m : messages) entries_.push_back(makeEntry(m));
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
    for (qsizetype i = 0; i < old.size(); ++i) {
        entries_.push_back(makeEntry(old[i].msg));
        entries_.back().think_expanded = old[i].think_expanded;
        renderEntry(cursor, int(i), !(streaming_ && i == old.size() - 1));
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
            setTokenUnderline(f, e.msg.tokens[t], t);
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
    if (thinkingHeaderAt(pos) >= 0) return {};  // the header stands for no token
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

QPair<int, int> MessageDocument::codeBlockLines(int pos) const {
    const auto is_code = [](const QTextBlock& b) {
        return b.isValid() && b.blockFormat().boolProperty(kCodeBlockProperty);
    };
    QTextBlock block = doc_->findBlock(pos);
    if (pos < 0 || !is_code(block)) return {-1, -1};
    QTextBlock first = block, last = block;
    while (is_code(first.previous())) first = first.previous();
    while (is_code(last.next())) last = last.next();
    return {first.position(), last.position()};
}

QString MessageDocument::codeBlockAt(int pos) const {
    const auto [first_line, last_line] = codeBlockLines(pos);
    if (first_line < 0) return {};
    const QTextBlock first = doc_->findBlock(first_line), last = doc_->findBlock(last_line);
    QStringList lines;
    for (QTextBlock b = first;; b = b.next()) {
        lines << b.text();
        if (b == last) break;
    }
    const auto fence = [](const QString& line) {
        return line.trimmed().startsWith(QLatin1String("```"));
    };
    if (!lines.isEmpty() && fence(lines.front())) lines.removeFirst();
    if (!lines.isEmpty() && fence(lines.back())) lines.removeLast();
    return lines.join(QLatin1Char('\n'));
}

QVector<QPair<int, int>> MessageDocument::textRanges(int message, int begin, int end) const {
    QVector<QPair<int, int>> out;
    if (message < 0 || message >= entries_.size()) return out;
    const Entry& e = entries_[message];
    begin = std::max(begin, 0);
    end = std::min<int>(end, int(e.msg.text.size()));
    if (begin >= end) return out;
    const auto add = [&out](int from, int to) {
        if (from >= to) return;
        if (!out.isEmpty() && out.back().second == from)
            out.back().second = to;
        else
            out.push_back({from, to});
    };
    if (e.token_starts.isEmpty()) {
        // Plain text (a prompt, or a reply restored without its tokens) is laid out as it is,
        // unless part of it is folded reasoning, whose layout this index does not record.
        if (e.fold_start >= 0) return out;
        add(std::min(e.body_start + begin, e.body_end), std::min(e.body_start + end, e.body_end));
        return out;
    }
    // Tokens: the first that ends after `begin`, then each until `end`.
    auto t = int(std::upper_bound(e.token_offsets.begin(),
                                  e.token_offsets.begin() + e.token_starts.size(), begin) -
                 e.token_offsets.begin()) -
             1;
    for (t = std::max(t, 0); t < e.token_starts.size() && e.token_offsets[t] < end; ++t) {
        const int from = e.token_offsets[t];
        const int to = from + int(e.msg.tokens[t].text.size());
        if (to <= begin) continue;
        const auto [shown_from, shown_to] = tokenRange({message, t});
        if (shown_to - shown_from == to - from) {
            add(shown_from + std::max(begin, from) - from, shown_from + std::min(end, to) - from);
        } else {
            add(shown_from, shown_to);  // partly shown (a held-back line break): all of it
        }
    }
    return out;
}

int MessageDocument::textOffsetAt(int pos, int* message) const {
    const int m = messageAtPosition(pos);
    if (message) *message = m;
    if (m < 0) return -1;
    const Entry& e = entries_[m];
    if (pos < e.body_start || pos >= e.body_end) return -1;
    if (e.token_starts.isEmpty()) {
        if (e.fold_start >= 0) return -1;
        const int offset = pos - e.body_start;
        return offset < e.msg.text.size() ? offset : -1;
    }
    const TokenRef ref = tokenAtPosition(pos);
    if (!ref.valid()) return -1;
    const auto [shown_from, shown_to] = tokenRange(ref);
    const int length = int(e.msg.tokens[ref.token].text.size());
    if (length == 0) return -1;
    const int inside = shown_to - shown_from == length ? pos - shown_from : 0;
    return e.token_offsets[ref.token] + std::min(inside, length - 1);
}

QPair<int, int> MessageDocument::messageBodyRange(int message) const {
    if (message < 0 || message >= entries_.size()) return {-1, -1};
    return {entries_[message].body_start, entries_[message].body_end};
}

}  // namespace tokenscope::ui
