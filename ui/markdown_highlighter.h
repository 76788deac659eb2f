#pragma once
// Markdown in the chat, rendered by styling the text in place: **bold**, *italic*, `inline
// code`, headings, list markers, block quotes, links and table pipes get their look, the
// markdown markers themselves are dimmed, table columns are padded to line up, code fences are
// hidden (an opening fence's language stays as the block's label), and fenced code blocks are
// highlighted by language (Python, C/C++, JavaScript/TypeScript, Rust, Go, Java, shell, JSON;
// keywords, strings, comments, numbers).
//
// Why styling instead of a markdown-to-rich-text conversion (QTextDocument::setMarkdown, md4c):
// the transcript is a token transcript. Every character a token produced stays in the document
// at its position, so hovering, clicking, colouring by probability and the attention overlay map
// characters to tokens exactly while a reply streams; a conversion drops the markers and
// reflows text, and would need a second position map for every token. The styling is a
// QSyntaxHighlighter: its formats are drawn over the document's own (the probability tints
// stay), it touches only the blocks an insertion changed (streaming stays cheap), and nothing
// is written into the document, so copy still gives the markdown as the model wrote it.
//
// The rules are line-level patterns, not a full CommonMark parser: emphasis spanning lines and
// nested constructs are left as they are. Code blocks come from MessageDocument, which marks
// their blocks (kCodeBlockProperty); the fence line's language is carried to the lines below it
// in the block state.
#include <QHash>
#include <QPalette>
#include <QSyntaxHighlighter>
#include <QTextCharFormat>

namespace tokenscope::ui {

class MarkdownHighlighter : public QSyntaxHighlighter {
    Q_OBJECT
  public:
    explicit MarkdownHighlighter(QTextDocument* document);
    // Colours follow the palette (light or dark); call after it changes.
    void setPalette(const QPalette& palette);

    // The language a fence line names ("```py" -> python), as the block state stores it;
    // 0 for none or one without rules.
    static int languageOf(const QString& fence_line);

  protected:
    void highlightBlock(const QString& text) override;

  private:
    void highlightProse(const QString& text);
    void highlightCode(const QString& text, int language);
    // A table row: pipes dimmed, the header bold, the columns padded to line up (see .cpp).
    void highlightTableRow(const QString& text);
    // The widths of a row's cells in the document's font (bold for the header row).
    QVector<qreal> cellWidths(const QString& text, bool header);
    // Dims [start, start + length): a markdown marker.
    void dim(int start, int length);

    QTextCharFormat marker_, keyword_, string_, comment_, number_, inline_code_, link_, quote_;
    QTextCharFormat hidden_;       // code fences: kept in the text, not shown
    QTextCharFormat fence_label_;  // the language an opening fence names
    QColor accent_;
    // The column widths last used for each table, by its first row's block number.
    QHash<int, QVector<qreal>> table_columns_;
    QHash<QString, QVector<qreal>> row_widths_;  // cellWidths() by header flag and row text
};

}  // namespace tokenscope::ui
