// The reasoning of thinking models (<think>…</think>) in the chat: folded under a header while it
// streams and after, unfolded and folded by a click on the header, restored the same way, and
// never in the way of token hit-testing or of the message's own text.
#include <QApplication>
#include <QClipboard>
#include <QHelpEvent>
#include <QKeyEvent>
#include <QScrollBar>
#include <QSignalSpy>
#include <QTest>
#include <QTextBrowser>
#include <QTextCursor>
#include <QTextDocument>
#include <QToolTip>

#include "chat_view.h"
#include "message_document.h"
#include "panel_data.h"
#include "widget_test_support.h"

using namespace tokenscope::ui;

namespace {

TokenData token(const QString& text, int id) {
    TokenData t;
    t.id = id;
    t.text = text;
    t.probability = 0.5f;
    t.logprob = -0.69f;
    return t;
}

QVector<TokenData> tokens(const QStringList& pieces) {
    QVector<TokenData> out;
    for (int i = 0; i < pieces.size(); ++i) out.push_back(token(pieces[i], 100 + i));
    return out;
}

// A Qwen 3 reply, cut into tokens so that both tags are split. The reasoning is tokens 3..9
// (the 7 tokens between the tags), the answer tokens 13..15.
const QStringList kQwen = {"<th", "ink", ">\n", "Okay",  ",",     " the",  " user",  " says",
                           " hi", ".\n", "</",  "think", ">\n\n", "Hello", " there", "!"};
constexpr int kFirstAnswer = 13;

// The document text of [start, end), paragraph breaks as '\n'.
QString textOf(const MessageDocument* doc, QPair<int, int> range) {
    QTextCursor c(doc->document());
    c.setPosition(range.first);
    c.setPosition(range.second, QTextCursor::KeepAnchor);
    return c.selectedText().replace(QChar::ParagraphSeparator, u'\n');
}

QString shown(const MessageDocument* doc, int message) {
    return textOf(doc, doc->messageBodyRange(message));
}

QTextCharFormat formatAt(const MessageDocument* doc, int pos) {
    QTextCursor c(doc->document());
    c.setPosition(pos + 1);  // the format of the character before the cursor
    return c.charFormat();
}

void streamAll(ChatView& view, const QStringList& pieces) {
    const QVector<TokenData> list = tokens(pieces);
    for (const TokenData& t : list) view.appendToken(t);
    view.finishAssistantMessage();
}

}  // namespace

class TestChatThinking : public QObject {
    Q_OBJECT

    // Every shown token of a message maps back exactly: its range holds its text, every
    // position in it finds it, and a point on it in the viewport finds it too.
    void verifyTokens(ChatView& view, int message, const QStringList& pieces, int first, int last) {
        MessageDocument* doc = view.messageDocument();
        for (int t = first; t <= last; ++t) {
            const TokenRef ref{message, t};
            const auto range = doc->tokenRange(ref);
            QCOMPARE(textOf(doc, range), pieces[t]);
            for (int pos = range.first; pos < range.second; ++pos)
                QCOMPARE(doc->tokenAtPosition(pos), ref);
            const QRect r = view.tokenRect(ref);
            QVERIFY2(!r.isEmpty(), qPrintable(pieces[t]));
            QCOMPARE(view.tokenAt(r.center()), ref);
        }
    }

    void clickHeader(ChatView& view, int message) {
        QRect r = view.thinkingHeaderRect(message);
        QVERIFY(!r.isEmpty());
        if (!view.transcript()->viewport()->rect().contains(r)) {
            QScrollBar* bar = view.transcript()->verticalScrollBar();
            bar->setValue(bar->value() + r.top() - 10);
            r = view.thinkingHeaderRect(message);
        }
        QTest::mouseClick(view.transcript()->viewport(), Qt::LeftButton, {}, r.center());
    }

  private slots:
    void streamingFoldsTheReasoningTokenByToken() {
        ChatView view;
        view.resize(600, 400);
        view.show();
        QVERIFY(QTest::qWaitForWindowExposed(&view));
        view.addMessage(MessageRole::User, QStringLiteral("Hi"));
        view.beginAssistantMessage();
        MessageDocument* doc = view.messageDocument();
        const QVector<TokenData> list = tokens(kQwen);
        QStringList seen;
        for (int i = 0; i < list.size(); ++i) {
            view.appendToken(list[i]);
            view.flushPendingTokens();
            seen << shown(doc, 1);
        }
        // A split "<think>" and the newline after it show nothing, not even the header.
        QCOMPARE(seen[0], QString());
        QCOMPARE(seen[2], QString());
        QVERIFY(!seen[2].contains(u'<'));
        // Then the header counts the reasoning live; the reasoning itself stays folded.
        QCOMPARE(seen[3], QStringLiteral("▸ Thinking… (1 token)"));
        QCOMPARE(seen[9], QStringLiteral("▸ Thinking… (7 tokens)"));
        QCOMPARE(seen[10], QStringLiteral("▸ Thinking… (7 tokens)"));  // "</" may be the tag
        // Closed: the answer goes below it in normal text.
        QCOMPARE(seen[12], QStringLiteral("▸ Thought for 7 tokens"));
        QCOMPARE(seen[15], QStringLiteral("▸ Thought for 7 tokens\nHello there!"));
        view.finishAssistantMessage();
        QVERIFY(doc->hasThinking(1));
        QVERIFY(!doc->thinkingExpanded(1));
        QVERIFY(!doc->document()->toPlainText().contains(QStringLiteral("the user says")));
        QVERIFY(!doc->document()->toPlainText().contains(QStringLiteral("think>")));

        // The message keeps every token and its whole text.
        QCOMPARE(view.message(1).text, kQwen.join(QString()));
        QCOMPARE(view.message(1).tokens.size(), kQwen.size());

        const int hello = doc->tokenRange({1, kFirstAnswer}).first;
        QVERIFY(!formatAt(doc, hello).fontItalic());
        verifyTokens(view, 1, kQwen, kFirstAnswer, int(kQwen.size()) - 1);
        // Folded tokens show no text and sit at the header's end; the header is no token.
        const auto header = doc->thinkingHeaderRange(1);
        for (int t = 0; t < kFirstAnswer; ++t) {
            const auto range = doc->tokenRange({1, t});
            QCOMPARE(range.first, header.second);
            QVERIFY2(textOf(doc, range).trimmed().isEmpty(), qPrintable(textOf(doc, range)));
        }
        for (int pos = header.first; pos <= header.second; ++pos)
            QVERIFY(!doc->tokenAtPosition(pos).valid());
    }

    void clickUnfoldsAndFoldsTheReasoning() {
        ChatView view;
        view.resize(600, 400);
        view.show();
        QVERIFY(QTest::qWaitForWindowExposed(&view));
        view.addMessage(MessageRole::User, QStringLiteral("Hi"));
        view.beginAssistantMessage();
        streamAll(view, kQwen);
        MessageDocument* doc = view.messageDocument();
        QSignalSpy clicked(&view, &ChatView::tokenClicked);
        tokenscope::ui::test::save_png(view, QStringLiteral("chat_thinking_folded"));

        // Hovering the header says what a click does.
        QWidget* viewport = view.transcript()->viewport();
        const QPoint at = view.thinkingHeaderRect(1).center();
        QHelpEvent help(QEvent::ToolTip, at, viewport->mapToGlobal(at));
        QApplication::sendEvent(viewport, &help);
        QTRY_VERIFY(QToolTip::isVisible());
        QCOMPARE(QToolTip::text(), QStringLiteral("Show the model's reasoning"));
        QToolTip::hideText();

        clickHeader(view, 1);
        QTRY_VERIFY(doc->thinkingExpanded(1));
        QCOMPARE(clicked.count(), 0);  // the header is not a token
        QCOMPARE(shown(doc, 1),
                 QStringLiteral("▾ Thought for 7 tokens\nOkay, the user says hi.\nHello there!"));
        tokenscope::ui::test::save_png(view, QStringLiteral("chat_thinking_unfolded"));
        // Reasoning dimmed and italic, answer not.
        const int user = doc->tokenRange({1, 6}).first;
        QVERIFY(formatAt(doc, user).fontItalic());
        QVERIFY(formatAt(doc, user).foreground().color() !=
                formatAt(doc, doc->tokenRange({1, kFirstAnswer}).first).foreground().color());
        QVERIFY(!formatAt(doc, doc->tokenRange({1, kFirstAnswer}).first).fontItalic());
        // Reasoning tokens are now inspectable, answer tokens still exact.
        verifyTokens(view, 1, kQwen, 4, 8);
        verifyTokens(view, 1, kQwen, kFirstAnswer, int(kQwen.size()) - 1);
        QTest::mouseClick(view.transcript()->viewport(), Qt::LeftButton, {},
                          view.tokenRect({1, 6}).center());
        QCOMPARE(clicked.count(), 1);
        QCOMPARE(clicked.at(0).at(1).toInt(), 6);

        clickHeader(view, 1);
        QTRY_VERIFY(!doc->thinkingExpanded(1));
        QCOMPARE(shown(doc, 1), QStringLiteral("▸ Thought for 7 tokens\nHello there!"));
        verifyTokens(view, 1, kQwen, kFirstAnswer, int(kQwen.size()) - 1);

        // Keyboard: Enter with the text cursor on the header unfolds it.
        QTextCursor cursor(doc->document());
        cursor.setPosition(doc->thinkingHeaderRange(1).first + 1);
        view.transcript()->setTextCursor(cursor);
        QTest::keyClick(view.transcript(), Qt::Key_Return);
        QVERIFY(doc->thinkingExpanded(1));
        QCOMPARE(view.message(1).text, kQwen.join(QString()));
    }

    // Unfolding during streaming: the rest of the reasoning and the answer continue in place.
    void unfoldedWhileStreaming() {
        ChatView view;
        view.resize(600, 400);
        view.show();
        QVERIFY(QTest::qWaitForWindowExposed(&view));
        view.beginAssistantMessage();
        const QVector<TokenData> list = tokens(kQwen);
        for (int i = 0; i < 6; ++i) view.appendToken(list[i]);
        view.flushPendingTokens();
        MessageDocument* doc = view.messageDocument();
        clickHeader(view, 0);
        QTRY_VERIFY(doc->thinkingExpanded(0));
        QCOMPARE(shown(doc, 0), QStringLiteral("▾ Thinking… (3 tokens)\nOkay, the"));
        for (int i = 6; i < list.size(); ++i) view.appendToken(list[i]);
        view.finishAssistantMessage();
        QCOMPARE(shown(doc, 0),
                 QStringLiteral("▾ Thought for 7 tokens\nOkay, the user says hi.\nHello there!"));
        verifyTokens(view, 0, kQwen, 3, 8);
        verifyTokens(view, 0, kQwen, kFirstAnswer, int(kQwen.size()) - 1);
    }

    // A finished reply's note ends with a Copy link; clicking it puts the answer on the
    // clipboard without the reasoning and the tags. Copy message (the context menu's action)
    // copies a user message as typed.
    void copyLinkCopiesTheAnswerWithoutReasoning() {
        ChatView view;
        view.resize(600, 500);
        view.show();
        QVERIFY(QTest::qWaitForWindowExposed(&view));
        view.addMessage(MessageRole::User, QStringLiteral("Say **hi**"));
        view.beginAssistantMessage();
        streamAll(view, kQwen);
        view.setMessageNote(1, QStringLiteral("16 tokens"));
        QVERIFY(view.copyLinkRect(0).isEmpty());  // no note under a user message, no link
        const QRect link = view.copyLinkRect(1);
        QVERIFY(!link.isEmpty());
        QCOMPARE(textOf(view.messageDocument(), view.messageDocument()->copyLinkRange(1)),
                 QStringLiteral("Copy"));
        QGuiApplication::clipboard()->setText(QStringLiteral("before"));
        QTest::mouseClick(view.transcript()->viewport(), Qt::LeftButton, {}, link.center());
        QTRY_COMPARE(QGuiApplication::clipboard()->text(), QStringLiteral("Hello there!"));
        // "Copy as text" beside it: the markdown rendered away.
        QCOMPARE(textOf(view.messageDocument(), view.messageDocument()->copyTextLinkRange(1)),
                 QStringLiteral("Copy as text"));
        view.copyMessage(0);
        QCOMPARE(QGuiApplication::clipboard()->text(), QStringLiteral("Say **hi**"));
        // A restored reply without its tokens copies the same way.
        QVector<ChatMessage> history(1);
        history[0].role = MessageRole::Assistant;
        history[0].text = QStringLiteral("<think>plain reasoning</think>Plain answer");
        history[0].note = QStringLiteral("restored");
        view.setMessages(history);
        QVERIFY(!view.copyLinkRect(0).isEmpty());
        view.copyMessage(0);
        QCOMPARE(QGuiApplication::clipboard()->text(), QStringLiteral("Plain answer"));
    }

    void restoredMessagesFoldTheSameWay() {
        ChatView view;
        view.resize(600, 700);
        view.show();
        QVERIFY(QTest::qWaitForWindowExposed(&view));
        const QStringList second = {"<think>",  "\n",   "Second", " thought", "\n",
                                    "</think>", "\n\n", "Fine",   "."};
        QVector<ChatMessage> history(5);
        history[0].role = MessageRole::User;  // a user message never folds
        history[0].text = QStringLiteral("<think>mine</think> stays");
        history[1].role = MessageRole::Assistant;
        history[1].tokens = tokens(kQwen);
        history[2].role = MessageRole::User;
        history[2].text = QStringLiteral("Again");
        history[3].role = MessageRole::Assistant;
        history[3].tokens = tokens(second);
        history[3].note = QStringLiteral("9 tokens");
        history[4].role = MessageRole::Assistant;  // restored without its tokens
        history[4].text = QStringLiteral("<think>plain reasoning</think>Plain answer");
        view.setMessages(history);
        MessageDocument* doc = view.messageDocument();

        QVERIFY(!doc->hasThinking(0));
        QCOMPARE(shown(doc, 0), history[0].text);
        QCOMPARE(shown(doc, 1), QStringLiteral("▸ Thought for 7 tokens\nHello there!"));
        QCOMPARE(shown(doc, 3), QStringLiteral("▸ Thought for 4 tokens\nFine."));
        QCOMPARE(shown(doc, 4), QStringLiteral("▸ Thoughts\nPlain answer"));
        QCOMPARE(view.message(1).text, kQwen.join(QString()));
        QCOMPARE(view.message(3).text, second.join(QString()));
        QCOMPARE(view.message(4).text, history[4].text);
        verifyTokens(view, 3, second, 7, 8);

        // Unfolding an earlier reply moves the later ones; their tokens and headers follow.
        clickHeader(view, 1);
        QTRY_VERIFY(doc->thinkingExpanded(1));
        QCOMPARE(textOf(doc, doc->thinkingHeaderRange(3)),
                 QStringLiteral("▸ Thought for 4 tokens"));
        verifyTokens(view, 3, second, 7, 8);
        QVERIFY(doc->document()->toPlainText().contains(QStringLiteral("9 tokens")));
        clickHeader(view, 3);
        QTRY_VERIFY(doc->thinkingExpanded(3));
        QCOMPARE(shown(doc, 3), QStringLiteral("▾ Thought for 4 tokens\nSecond thought\nFine."));
        QCOMPARE(shown(doc, 4), QStringLiteral("▸ Thoughts\nPlain answer"));
        doc->setThinkingExpanded(1, false);
        verifyTokens(view, 3, second, 2, 3);
        verifyTokens(view, 3, second, 7, 8);

        // A relayout of everything (palette change) keeps each message's fold state.
        view.setPalette(tokenscope::ui::test::dark_palette());
        QVERIFY(!doc->thinkingExpanded(1));
        QVERIFY(doc->thinkingExpanded(3));
        QCOMPARE(shown(doc, 3), QStringLiteral("▾ Thought for 4 tokens\nSecond thought\nFine."));
        view.setColorByProbability(true);
        verifyTokens(view, 3, second, 2, 3);
        tokenscope::ui::test::save_png(view, QStringLiteral("chat_thinking_dark"));
        // A newly restored conversation starts folded.
        view.setMessages(history);
        QVERIFY(!doc->thinkingExpanded(3));
    }

    // Qwen 3 with thinking off: an empty block. Nothing to unfold, so no header at all.
    void emptyThinkBlockShowsNoHeader() {
        ChatView view;
        view.show();
        QVERIFY(QTest::qWaitForWindowExposed(&view));
        const QStringList pieces = {"<think>", "\n\n", "</think>", "\n\n", "Hi", "!"};
        view.beginAssistantMessage();
        streamAll(view, pieces);
        MessageDocument* doc = view.messageDocument();
        QVERIFY(!doc->hasThinking(0));
        QCOMPARE(shown(doc, 0), QStringLiteral("Hi!"));
        QCOMPARE(view.message(0).text, pieces.join(QString()));
        verifyTokens(view, 0, pieces, 4, 5);
        for (int t = 0; t < 4; ++t) {
            const auto [start, end] = doc->tokenRange({0, t});
            QCOMPARE(start, doc->messageBodyRange(0).first);
            QCOMPARE(end, start);
        }
    }

    // A model without reasoning: shown exactly as written, "<" and "</" pieces included.
    void replyWithoutThinkTagsIsUnchanged() {
        ChatView view;
        view.resize(700, 300);
        view.show();
        QVERIFY(QTest::qWaitForWindowExposed(&view));
        const QStringList pieces = {"Use", " <",  "b",   ">",     "bold", "</",  "b",
                                    ">",   " or", " </", "think", "ing",  ".\n", "Done"};
        view.beginAssistantMessage();
        streamAll(view, pieces);
        MessageDocument* doc = view.messageDocument();
        QVERIFY(!doc->hasThinking(0));
        QCOMPARE(shown(doc, 0), pieces.join(QString()));
        verifyTokens(view, 0, pieces, 0, 11);
        QVERIFY(!formatAt(doc, doc->tokenRange({0, 4}).first).fontItalic());
    }

    // Generation stopped mid-thought: the header says so, the reasoning unfolds, and every
    // token has a range.
    void unclosedThinkingAfterStop() {
        ChatView view;
        view.resize(600, 300);
        view.show();
        QVERIFY(QTest::qWaitForWindowExposed(&view));
        const QStringList pieces = {"<think>", "\n", "Let", " me", " think", " </"};
        view.beginAssistantMessage();
        for (const TokenData& t : tokens(pieces)) view.appendToken(t);
        view.flushPendingTokens();
        MessageDocument* doc = view.messageDocument();
        QCOMPARE(shown(doc, 0), QStringLiteral("▸ Thinking… (4 tokens)"));
        view.finishAssistantMessage();
        QCOMPARE(shown(doc, 0), QStringLiteral("▸ Thinking stopped after 5 tokens"));
        for (int t = 0; t < pieces.size(); ++t) QVERIFY(doc->tokenRange({0, t}).first >= 0);
        const auto header = doc->thinkingHeaderRange(0);
        QVERIFY(!doc->tokenAtPosition(header.first).valid());
        clickHeader(view, 0);
        QTRY_VERIFY(doc->thinkingExpanded(0));
        QCOMPARE(shown(doc, 0),
                 QStringLiteral("▾ Thinking stopped after 5 tokens\nLet me think </"));
        verifyTokens(view, 0, pieces, 2, 5);
        QCOMPARE(view.message(0).text, pieces.join(QString()));
    }

    // The chat template wrote "<think>" into the prompt: the reply is shown as it comes and
    // folds when "</think>" shows that it was reasoning.
    void openingTagInThePrompt() {
        ChatView view;
        view.resize(600, 300);
        view.show();
        QVERIFY(QTest::qWaitForWindowExposed(&view));
        const QStringList pieces = {"Okay", ",", " so", ".\n", "</", "think", ">\n\n", "Yes", "."};
        view.beginAssistantMessage();
        const QVector<TokenData> list = tokens(pieces);
        for (int i = 0; i < 4; ++i) view.appendToken(list[i]);
        view.flushPendingTokens();
        MessageDocument* doc = view.messageDocument();
        QCOMPARE(shown(doc, 0), QStringLiteral("Okay, so.\n"));
        for (int i = 4; i < list.size(); ++i) view.appendToken(list[i]);
        view.finishAssistantMessage();
        QCOMPARE(shown(doc, 0), QStringLiteral("▸ Thought for 4 tokens\nYes."));
        verifyTokens(view, 0, pieces, 7, 8);
        QCOMPARE(view.message(0).text, pieces.join(QString()));
    }
};

QTEST_MAIN(TestChatThinking)
#include "test_chat_thinking.moc"
