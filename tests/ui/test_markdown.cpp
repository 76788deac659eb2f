// Markdown in the chat (issue 19), styled in place by MarkdownHighlighter: each construct gets
// its look at the characters it covers, markers are dimmed but kept (the document's text is
// the reply as written, so token positions stay exact), code blocks are highlighted by the
// language of their fence, snake_case is not italic, and the view can turn it off.
#include <QAbstractTextDocumentLayout>
#include <cmath>

#include <QApplication>
#include <QClipboard>
#include <QTest>
#include <QTextBlock>
#include <QTextDocument>
#include <QTextLayout>

#include "chat_view.h"
#include "markdown_highlighter.h"
#include "message_document.h"

using namespace tokenscope::ui;

namespace {

const QString kReply = QStringLiteral(
    "# Title\n"
    "Some **bold** and *it* and `code` text.\n"
    "- item one\n"
    "> a quote\n"
    "See [docs](http://example.org) here.\n"
    "```python\n"
    "def f(x):  # the comment\n"
    "    return \"str\" + 42\n"
    "```\n"
    "after_word_with_underscores and 2 * 3 * 4");

// The highlighter's format at the first character of `text` (+ offset) in the document.
QTextCharFormat formatAt(QTextDocument* doc, const QString& text, int offset = 0) {
    const QTextCursor found = doc->find(text);
    if (found.isNull()) return {};
    const int pos = found.selectionStart() + offset;
    const QTextBlock block = doc->findBlock(pos);
    const int in_block = pos - block.position();
    for (const QTextLayout::FormatRange& r : block.layout()->formats())
        if (in_block >= r.start && in_block < r.start + r.length) return r.format;
    return {};
}

}  // namespace

class TestMarkdown : public QObject {
    Q_OBJECT

  private slots:
    void constructsGetTheirLook() {
        MessageDocument doc;
        doc.addMessage(MessageRole::Assistant, kReply);
        MarkdownHighlighter h(doc.document());
        QTextDocument* d = doc.document();
        const QPalette palette;
        const QColor text = palette.color(QPalette::Text);

        // The text is the reply as written, markers included.
        QVERIFY(d->toPlainText().contains("Some **bold** and *it* and `code` text."));

        QCOMPARE(formatAt(d, "bold").fontWeight(), int(QFont::Bold));
        const QColor marker = formatAt(d, "**bold").foreground().color();
        QVERIFY(marker.isValid() && marker != text);  // dimmed
        QVERIFY(formatAt(d, "it*").fontItalic());
        QVERIFY(formatAt(d, "code`").fontFixedPitch());
        QCOMPARE(formatAt(d, "`code").foreground().color(), marker);
        QCOMPARE(formatAt(d, "Title").fontWeight(), int(QFont::Bold));
        QVERIFY(formatAt(d, "Title").fontPointSize() > d->defaultFont().pointSizeF());
        QCOMPARE(formatAt(d, "# Title").foreground().color(), marker);
        QCOMPARE(formatAt(d, "- item").fontWeight(), int(QFont::Bold));
        QVERIFY(formatAt(d, "a quote").fontItalic());
        QVERIFY(formatAt(d, "docs").fontUnderline());
        QCOMPARE(formatAt(d, "(http").foreground().color(), marker);

        // Python: keyword, comment, string, number.
        const QTextCharFormat def = formatAt(d, "def f");
        QVERIFY(def.foreground().color() != text && def.fontWeight() > QFont::Normal);
        QVERIFY(formatAt(d, "# the comment").fontItalic());
        const QColor string = formatAt(d, "\"str\"").foreground().color();
        const QColor number = formatAt(d, "42").foreground().color();
        QVERIFY(string.isValid() && number.isValid() && string != number && string != text);
        // Fences: the backticks hidden (point size 1, no colour) but still in the text; the
        // opening fence's language stays as the block's label; the closing fence is hidden
        // whole, so its line shrinks to a sliver.
        const QTextCharFormat ticks = formatAt(d, "```python");
        QCOMPARE(ticks.foreground().color().alpha(), 0);
        QCOMPARE(ticks.fontPointSize(), 1.0);
        const QTextCharFormat label = formatAt(d, "```python", 3);
        QVERIFY(label.foreground().color().alpha() > 0);
        QVERIFY(label.fontPointSize() > 1.0);
        const QTextBlock code_line = d->findBlock(d->find("42").selectionStart());
        const QTextBlock closing = code_line.next();
        QCOMPARE(closing.text(), QString("```"));
        QAbstractTextDocumentLayout* layout = d->documentLayout();
        QVERIFY2(layout->blockBoundingRect(closing).height() <
                     0.5 * layout->blockBoundingRect(code_line).height(),
                 qPrintable(QString("%1 vs %2")
                                .arg(layout->blockBoundingRect(closing).height())
                                .arg(layout->blockBoundingRect(code_line).height())));
        QVERIFY(!formatAt(d, "x):").hasProperty(QTextFormat::ForegroundBrush));  // plain

        // snake_case and arithmetic are not emphasis.
        QVERIFY(!formatAt(d, "word_with", 5).fontItalic());
        QVERIFY(!formatAt(d, "3 * 4").fontItalic());

        // Dark palette: the colours follow.
        QPalette dark;
        dark.setColor(QPalette::Base, QColor(0x1E, 0x1E, 0x21));
        dark.setColor(QPalette::Text, QColor(0xE6, 0xE6, 0xE6));
        const QColor light_keyword = def.foreground().color();
        h.setPalette(dark);
        QVERIFY(formatAt(d, "def f").foreground().color() != light_keyword);
    }

    // "Copy as plain text": Qt's own markdown reader (md4c) takes the marks away.
    void plainTextCopy() {
        const QString plain = ChatView::markdownToPlainText(
            "# Title\nSome **bold** and `code`.\n\n- one\n- two\n\n```python\nx = 1\n```");
        QVERIFY2(plain.contains("Some bold and code."), qPrintable(plain));
        QVERIFY(plain.startsWith("Title"));
        QVERIFY(plain.contains("x = 1"));
        QVERIFY(!plain.contains("**") && !plain.contains("```") && !plain.contains("# "));
        ChatView view;
        view.addMessage(MessageRole::Assistant, "It is **fine**.");
        view.copyMessageAsPlainText(0);
        QCOMPARE(QGuiApplication::clipboard()->text(), QString("It is fine."));
    }

    void fenceLanguages() {
        QCOMPARE(MarkdownHighlighter::languageOf("```python"),
                 MarkdownHighlighter::languageOf("```py"));
        QVERIFY(MarkdownHighlighter::languageOf("```cpp") > 0);
        QVERIFY(MarkdownHighlighter::languageOf("```ts") > 0);
        QCOMPARE(MarkdownHighlighter::languageOf("```"), 0);
        QCOMPARE(MarkdownHighlighter::languageOf("```brainfuck"), 0);
    }

    // Table columns line up: every row's pipes sit at the same x (they would not unpadded:
    // "Alexandra" is wider than "Name" and "Bo"), the header is bold, the separator dimmed, and
    // the text is unchanged. Streamed in token by token, a later row that widens a column
    // moves the pipes of the rows above it.
    void tableColumnsLineUp() {
        const QStringList pieces = {"| Name", " | Age",      " |\n",    "|---|---|\n", "| Bo | 1",
                                    " |\n",   "| Alexandra", " | 1234", "567 |"};
        for (const bool streamed : {false, true}) {
            ChatView view;
            view.resize(700, 400);
            view.show();  // the transcript's text width comes from its laid-out viewport
            QVERIFY(QTest::qWaitForWindowExposed(&view));
            if (streamed) {
                view.beginAssistantMessage();
                for (const QString& piece : pieces) {
                    TokenData t;
                    t.text = piece;
                    t.probability = 0.5f;
                    view.appendToken(t);
                    view.flushPendingTokens();
                    QApplication::processEvents();
                }
                view.finishAssistantMessage();
            } else {
                view.addMessage(MessageRole::Assistant, pieces.join(QString()));
            }
            QApplication::processEvents();  // the queued re-layout of earlier rows
            QTextDocument* d = view.messageDocument()->document();
            QVERIFY(d->toPlainText().contains("| Alexandra | 1234567 |"));
            const auto pipe_xs = [&](const QString& row_start) {
                const QTextBlock b = d->findBlock(d->find(row_start).selectionStart());
                d->documentLayout()->documentSize();  // lays the whole document out
                QVector<qreal> xs;
                if (b.layout()->lineCount() != 1) return xs;
                for (int i = 0; i < b.text().size(); ++i)
                    if (b.text()[i] == u'|') xs << b.layout()->lineAt(0).cursorToX(i);
                return xs;
            };
            const QVector<qreal> header = pipe_xs("| Name"), bo = pipe_xs("| Bo"),
                                 alexandra = pipe_xs("| Alexandra");
            QCOMPARE(header.size(), 3);
            QCOMPARE(bo.size(), 3);
            QCOMPARE(alexandra.size(), 3);
            for (int k = 1; k < 3; ++k) {
                QVERIFY2(std::abs(header[k] - alexandra[k]) < 1.0 &&
                             std::abs(bo[k] - alexandra[k]) < 1.0,
                         qPrintable(QString("pipe %1: %2 %3 %4")
                                        .arg(k)
                                        .arg(header[k])
                                        .arg(bo[k])
                                        .arg(alexandra[k])));
            }
            QCOMPARE(formatAt(d, "Name").fontWeight(), int(QFont::Bold));
            QVERIFY(formatAt(d, "Bo").fontWeight() != int(QFont::Bold));
            QVERIFY(formatAt(d, "---").foreground().color() != QPalette().color(QPalette::Text));
        }
    }

    // Streamed token by token into the chat it is styled too; View's toggle turns it off.
    void chatViewStreamsAndToggles() {
        ChatView view;
        view.resize(600, 400);
        view.beginAssistantMessage();
        for (const char* piece : {"Use", " **", "care", "**", " with", " `", "rm", "`", "."}) {
            TokenData t;
            t.text = QString::fromLatin1(piece);
            t.probability = 0.5f;
            view.appendToken(t);
        }
        view.finishAssistantMessage();
        QApplication::processEvents();
        QTextDocument* d = view.messageDocument()->document();
        QCOMPARE(formatAt(d, "care").fontWeight(), int(QFont::Bold));
        QVERIFY(formatAt(d, "rm`").fontFixedPitch());
        // Token positions: "care" is still token 2, where the document says.
        const auto range = view.messageDocument()->tokenRange({0, 2});
        QCOMPARE(d->toPlainText().mid(range.first, range.second - range.first), QString("care"));
        QVERIFY(view.renderMarkdown());
        view.setRenderMarkdown(false);
        QCOMPARE(formatAt(d, "care").fontWeight(), int(QFont::Normal));
        view.setRenderMarkdown(true);
        QCOMPARE(formatAt(d, "care").fontWeight(), int(QFont::Bold));
    }
};

QTEST_MAIN(TestMarkdown)
#include "test_markdown.moc"
