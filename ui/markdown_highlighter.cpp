#include "markdown_highlighter.h"

#include <QFontDatabase>
#include <QFontInfo>
#include <QFontMetricsF>
#include <QRegularExpression>
#include <QSet>
#include <QTextBlock>
#include <QTimer>
#include <array>

#include "message_document.h"

namespace tokenscope::ui {

namespace {

// Block states: code lines carry kCodeState + their language; anything else -1.
constexpr int kCodeState = 1000;

struct Language {
    const char* names;     // what a fence may say, space-separated
    const char* keywords;  // space-separated
    const char* line_comment;
};

// Index + 1 is the language id (0: none).
constexpr std::array<Language, 8> kLanguages{{
    {"python py python3",
     "def class return if elif else for while in not and or is None True False import from as "
     "with try except finally raise lambda yield pass break continue global nonlocal async "
     "await self print",
     "#"},
    {"c cpp c++ cc cxx h hpp",
     "int char float double void bool auto const constexpr static struct class enum union "
     "namespace using template typename return if else for while do switch case break continue "
     "default new delete true false nullptr include define public private protected virtual "
     "override unsigned long short std",
     "//"},
    {"javascript js typescript ts jsx tsx",
     "function const let var return if else for while do switch case break continue new class "
     "extends import export from default async await try catch finally throw typeof instanceof "
     "null undefined true false this interface type",
     "//"},
    {"rust rs",
     "fn let mut pub struct enum impl trait use mod crate self Self return if else match for "
     "while loop break continue as ref move where true false Some None Ok Err",
     "//"},
    {"go golang",
     "func package import var const type struct interface map chan go defer return if else for "
     "range switch case break continue nil true false",
     "//"},
    {"java kotlin kt cs csharp",
     "public private protected static final class interface extends implements new return if "
     "else for while do switch case break continue try catch finally throw void int long "
     "boolean double float char String null true false this import package",
     "//"},
    {"bash sh shell zsh console",
     "if then else elif fi for in do done while case esac function return export local echo cd "
     "sudo apt pip python3 cmake make git",
     "#"},
    {"json jsonc", "true false null", ""},
}};

QSet<QString> keyword_set(int language) {
    QSet<QString> set;
    if (language < 1 || language > int(kLanguages.size())) return set;
    for (const QString& w :
         QString::fromLatin1(kLanguages[std::size_t(language - 1)].keywords).split(u' '))
        set.insert(w);
    return set;
}

QColor mixed(const QColor& a, const QColor& b, double t) {
    return QColor::fromRgbF(float(a.redF() * (1 - t) + b.redF() * t),
                            float(a.greenF() * (1 - t) + b.greenF() * t),
                            float(a.blueF() * (1 - t) + b.blueF() * t));
}

bool is_fence(const QString& text) {
    return text.trimmed().startsWith(QLatin1String("```"));
}

}  // namespace

MarkdownHighlighter::MarkdownHighlighter(QTextDocument* document) : QSyntaxHighlighter(document) {
    setPalette(QPalette());
}

int MarkdownHighlighter::languageOf(const QString& fence_line) {
    const QString name = fence_line.trimmed().mid(3).trimmed().section(u' ', 0, 0).toLower();
    if (name.isEmpty()) return 0;
    for (std::size_t i = 0; i < kLanguages.size(); ++i)
        if (QString::fromLatin1(kLanguages[i].names).split(u' ').contains(name)) return int(i) + 1;
    return 0;
}

void MarkdownHighlighter::setPalette(const QPalette& palette) {
    const QColor text = palette.color(QPalette::Text);
    const QColor base = palette.color(QPalette::Base);
    const bool dark = base.lightness() < text.lightness();
    marker_ = {};
    marker_.setForeground(mixed(text, base, 0.6));
    keyword_ = {};
    keyword_.setForeground(dark ? QColor(0xC6, 0x78, 0xDD) : QColor(0xA6, 0x26, 0xA4));
    keyword_.setFontWeight(QFont::DemiBold);
    string_ = {};
    string_.setForeground(dark ? QColor(0x98, 0xC3, 0x79) : QColor(0x50, 0xA1, 0x4F));
    comment_ = {};
    comment_.setForeground(mixed(text, base, 0.45));
    comment_.setFontItalic(true);
    number_ = {};
    number_.setForeground(dark ? QColor(0xD1, 0x9A, 0x66) : QColor(0x98, 0x68, 0x01));
    inline_code_ = {};
    inline_code_.setFontFamilies({QFontDatabase::systemFont(QFontDatabase::FixedFont).family()});
    inline_code_.setFontFixedPitch(true);
    inline_code_.setForeground(dark ? QColor(0xE5, 0xC0, 0x7B) : QColor(0xB3, 0x3A, 0x3A));
    link_ = {};
    link_.setForeground(palette.color(QPalette::Link));
    link_.setFontUnderline(true);
    quote_ = {};
    quote_.setForeground(mixed(text, base, 0.3));
    quote_.setFontItalic(true);
    hidden_ = {};
    hidden_.setFontPointSize(1);
    hidden_.setForeground(Qt::transparent);
    fence_label_ = {};
    fence_label_.setFontPointSize(QFontInfo(document()->defaultFont()).pointSizeF() * 0.8);
    fence_label_.setFontWeight(QFont::DemiBold);
    fence_label_.setForeground(mixed(text, base, 0.35));
    accent_ = palette.color(QPalette::Highlight);
    row_widths_.clear();  // the document's font may have changed with the palette
    table_columns_.clear();
    rehighlight();
}

void MarkdownHighlighter::dim(int start, int length) {
    setFormat(start, length, marker_);
}

void MarkdownHighlighter::highlightBlock(const QString& text) {
    const bool code =
        currentBlock().blockFormat().boolProperty(MessageDocument::kCodeBlockProperty);
    const int previous = previousBlockState();
    if (!code) {
        setCurrentBlockState(-1);
        highlightProse(text);
        return;
    }
    if (is_fence(text)) {
        // Opening (the previous line is not code) or closing fence. The backticks are drawn
        // at a point size of 1 in no colour: the text stays in the document (token positions,
        // copy), but the line shrinks to a sliver. An opening fence keeps its language name,
        // as the code block's label.
        setFormat(0, int(text.size()), hidden_);
        const bool opening = previous < kCodeState;
        setCurrentBlockState(opening ? kCodeState + languageOf(text) : -1);
        if (opening) {
            static const QRegularExpression name(QStringLiteral("^\\s*```+\\s*(\\S+)"));
            if (const auto m = name.match(text); m.hasMatch())
                setFormat(int(m.capturedStart(1)), int(m.capturedLength(1)), fence_label_);
        }
        return;
    }
    const int language = previous >= kCodeState ? previous - kCodeState : 0;
    setCurrentBlockState(kCodeState + language);
    highlightCode(text, language);
}

void MarkdownHighlighter::highlightProse(const QString& text) {
    // Headings: the whole line larger and bold, the #s dimmed.
    static const QRegularExpression heading(QStringLiteral("^(#{1,6})\\s+\\S"));
    if (const auto m = heading.match(text); m.hasMatch()) {
        QTextCharFormat f;
        f.setFontWeight(QFont::Bold);
        const int level = int(m.capturedLength(1));
        f.setFontPointSize(QFontInfo(document()->defaultFont()).pointSizeF() * (level <= 1 ? 1.45
                                                                                : level == 2
                                                                                    ? 1.25
                                                                                    : 1.1));
        setFormat(0, int(text.size()), f);
        dim(0, level);
    }
    static const QRegularExpression list(QStringLiteral("^\\s*([-*+]|\\d+[.)])\\s"));
    if (const auto m = list.match(text); m.hasMatch()) {
        QTextCharFormat f;
        f.setForeground(accent_);
        f.setFontWeight(QFont::Bold);
        setFormat(int(m.capturedStart(1)), int(m.capturedLength(1)), f);
    }
    static const QRegularExpression quote(QStringLiteral("^\\s*>\\s?"));
    if (const auto m = quote.match(text); m.hasMatch()) {
        setFormat(int(m.capturedEnd()), int(text.size() - m.capturedEnd()), quote_);
        dim(int(m.capturedStart()), int(m.capturedLength()));
    }
    static const QRegularExpression rule(QStringLiteral("^\\s*([-*_])\\s*\\1\\s*\\1[-*_\\s]*$"));
    if (rule.match(text).hasMatch()) {
        dim(0, int(text.size()));
        return;
    }
    if (text.trimmed().startsWith(u'|')) highlightTableRow(text);
    // Inline code first: emphasis markers inside it are code, not emphasis.
    static const QRegularExpression code(QStringLiteral("`([^`]+)`"));
    QVector<QPair<int, int>> code_spans;
    for (auto it = code.globalMatch(text); it.hasNext();) {
        const auto m = it.next();
        setFormat(int(m.capturedStart(1)), int(m.capturedLength(1)), inline_code_);
        dim(int(m.capturedStart()), 1);
        dim(int(m.capturedEnd()) - 1, 1);
        code_spans.push_back({int(m.capturedStart()), int(m.capturedEnd())});
    }
    const auto in_code = [&](int pos) {
        for (const auto& [from, to] : code_spans)
            if (pos >= from && pos < to) return true;
        return false;
    };
    const auto emphasis = [&](const QRegularExpression& re, int marker, auto style) {
        for (auto it = re.globalMatch(text); it.hasNext();) {
            const auto m = it.next();
            if (in_code(int(m.capturedStart()))) continue;
            QTextCharFormat f = format(int(m.capturedStart(1)));
            style(f);
            setFormat(int(m.capturedStart(1)), int(m.capturedLength(1)), f);
            dim(int(m.capturedStart()), marker);
            dim(int(m.capturedEnd()) - marker, marker);
        }
    };
    static const QRegularExpression bold(
        QStringLiteral("(?:\\*\\*|__)(?=\\S)(.+?)(?<=\\S)(?:\\*\\*|__)"));
    static const QRegularExpression italic(
        QStringLiteral("(?<![*\\w])[*_](?=[^\\s*_])(.+?)(?<=[^\\s*_])[*_](?![*\\w])"));
    emphasis(bold, 2, [](QTextCharFormat& f) { f.setFontWeight(QFont::Bold); });
    emphasis(italic, 1, [](QTextCharFormat& f) { f.setFontItalic(true); });
    static const QRegularExpression link(QStringLiteral("\\[([^\\]]+)\\]\\(([^)\\s]+)\\)"));
    for (auto it = link.globalMatch(text); it.hasNext();) {
        const auto m = it.next();
        if (in_code(int(m.capturedStart()))) continue;
        dim(int(m.capturedStart()), 1);
        setFormat(int(m.capturedStart(1)), int(m.capturedLength(1)), link_);
        dim(int(m.capturedEnd(1)), int(m.capturedEnd() - m.capturedEnd(1)));
    }
}

namespace {

bool is_table_row(const QTextBlock& block) {
    return block.isValid() &&
           !block.blockFormat().boolProperty(MessageDocument::kCodeBlockProperty) &&
           block.text().trimmed().startsWith(u'|');
}

// |---|:--:| and the like: the row between a table's header and its body.
bool is_separator_row(const QString& text) {
    static const QRegularExpression re(
        QStringLiteral("^\\s*\\|?(\\s*:?-+:?\\s*\\|)+\\s*(:?-+:?\\s*)?$"));
    return re.match(text).hasMatch();
}

// Positions of the cell separators of a row (a backslash-escaped pipe is cell text).
QVector<int> pipes_of(const QString& text) {
    QVector<int> pipes;
    for (int i = 0; i < text.size(); ++i)
        if (text[i] == u'|' && (i == 0 || text[i - 1] != u'\\')) pipes.push_back(i);
    return pipes;
}

}  // namespace

QVector<qreal> MarkdownHighlighter::cellWidths(const QString& text, bool header) {
    // Every row of a table is measured again for each row highlighted (and a streamed row is
    // highlighted once per token), so measurements are remembered by the row's text.
    const QString key = (header ? QStringLiteral("h") : QStringLiteral("b")) + text;
    if (const auto it = row_widths_.constFind(key); it != row_widths_.constEnd()) return *it;
    QFont font = document()->defaultFont();
    if (header) font.setBold(true);
    const QFontMetricsF metrics(font);
    const QVector<int> pipes = pipes_of(text);
    QVector<qreal> widths;
    for (int k = 0; k + 1 < pipes.size(); ++k)
        widths.push_back(
            metrics.horizontalAdvance(text.mid(pipes[k] + 1, pipes[k + 1] - pipes[k] - 1)));
    if (row_widths_.size() > 4096) row_widths_.clear();  // a bound, not an eviction policy
    row_widths_.insert(key, widths);
    return widths;
}

void MarkdownHighlighter::highlightTableRow(const QString& text) {
    // The rows of this table: the run of table lines around this one.
    QTextBlock first = currentBlock();
    while (is_table_row(first.previous())) first = first.previous();
    const bool has_header = is_separator_row(first.next().text());
    const QVector<int> pipes = pipes_of(text);
    for (int pipe : pipes) dim(pipe, 1);
    const bool header = has_header && currentBlock() == first;
    if (header) {
        QTextCharFormat bold;
        bold.setFontWeight(QFont::Bold);
        for (int k = 0; k + 1 < pipes.size(); ++k)
            setFormat(pipes[k] + 1, pipes[k + 1] - pipes[k] - 1, bold);
    }
    if (is_separator_row(text)) {
        for (int k = 0; k + 1 < pipes.size(); ++k) dim(pipes[k] + 1, pipes[k + 1] - pipes[k] - 1);
    }
    // Columns: each as wide as its widest cell over the table's rows, so the pipes line up as
    // a grid. The text stays as written; the room a shorter cell lacks is letter spacing on its
    // last character (on the pipe before it when it is empty).
    QVector<qreal> columns;
    for (QTextBlock b = first; is_table_row(b); b = b.next()) {
        const QVector<qreal> w = cellWidths(b.text(), has_header && b == first);
        if (columns.size() < w.size()) columns.resize(w.size(), 0);
        for (int k = 0; k < w.size(); ++k) columns[k] = std::max(columns[k], w[k]);
    }
    const QVector<qreal> own = cellWidths(text, header);
    for (int k = 0; k < own.size(); ++k) {
        const qreal pad = columns[k] - own[k];
        if (pad < 0.5) continue;
        const int at = pipes[k + 1] - 1 > pipes[k] ? pipes[k + 1] - 1 : pipes[k];
        QTextCharFormat f = format(at);
        f.setFontLetterSpacingType(QFont::AbsoluteSpacing);
        f.setFontLetterSpacing(pad);
        setFormat(at, 1, f);
    }
    // A row that widened a column moves the pipes of the rows above it: lay those out again,
    // after this pass (a highlighter may not re-enter itself).
    const int key = first.blockNumber();
    if (table_columns_.value(key) != columns) {
        table_columns_.insert(key, columns);
        const int current = currentBlock().blockNumber();
        QTimer::singleShot(0, this, [this, key, current] {
            for (QTextBlock b = document()->findBlockByNumber(key); is_table_row(b); b = b.next())
                if (b.blockNumber() != current) rehighlightBlock(b);
        });
    }
}

void MarkdownHighlighter::highlightCode(const QString& text, int language) {
    if (language == 0) return;  // no rules for it: the code block's own look
    static std::array<QSet<QString>, kLanguages.size() + 1> keywords;
    if (keywords[std::size_t(language)].isEmpty())
        keywords[std::size_t(language)] = keyword_set(language);
    static const QRegularExpression word(QStringLiteral("\\b[A-Za-z_][A-Za-z0-9_]*\\b"));
    for (auto it = word.globalMatch(text); it.hasNext();) {
        const auto m = it.next();
        if (keywords[std::size_t(language)].contains(m.captured()))
            setFormat(int(m.capturedStart()), int(m.capturedLength()), keyword_);
    }
    static const QRegularExpression number(QStringLiteral("\\b\\d+(\\.\\d+)?\\b"));
    for (auto it = number.globalMatch(text); it.hasNext();) {
        const auto m = it.next();
        setFormat(int(m.capturedStart()), int(m.capturedLength()), number_);
    }
    static const QRegularExpression string(
        QStringLiteral(R"("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')"));
    QVector<QPair<int, int>> strings;
    for (auto it = string.globalMatch(text); it.hasNext();) {
        const auto m = it.next();
        setFormat(int(m.capturedStart()), int(m.capturedLength()), string_);
        strings.push_back({int(m.capturedStart()), int(m.capturedEnd())});
    }
    const QString comment = QString::fromLatin1(kLanguages[std::size_t(language - 1)].line_comment);
    if (comment.isEmpty()) return;
    for (int from = 0; (from = int(text.indexOf(comment, from))) >= 0; ++from) {
        bool quoted = false;
        for (const auto& [a, b] : strings)
            if (from >= a && from < b) quoted = true;
        if (quoted) continue;
        setFormat(from, int(text.size()) - from, comment_);
        break;
    }
}

}  // namespace tokenscope::ui
