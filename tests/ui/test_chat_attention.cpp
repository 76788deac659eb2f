// The chat's attention overlay (issue 18): which chat text each context position stands for
// (AttentionTextMap), the message-text index of MessageDocument it relies on, and ChatView
// drawing a hovered token's attention on the transcript. Every expected span and weight below is
// worked out by hand from the strings and rows the test builds.
#include <QApplication>
#include <QLabel>
#include <QSignalSpy>
#include <QTest>
#include <QTextBrowser>
#include <QTextCursor>
#include <QTextDocument>

#include "attention_text_map.h"
#include "chat_view.h"
#include "message_document.h"
#include "panel_data.h"

using namespace tokenscope::ui;

namespace {

using Span = AttentionTextMap::Span;

TokenData token(const QString& text, int id) {
    TokenData t;
    t.id = id;
    t.text = text;
    t.probability = 0.5f;
    return t;
}

// A ChatML-like context: control tokens decode to no bytes (as Tokenizer::token_bytes gives
// them), the template's words and line breaks are text the chat does not show.
//   0 <|im_start|>  1 user  2 \n  3 What  4 ' is'  5 ' the'  6 ' capital'  7 ' of'  8 ' France'
//   9 ?  10 <|im_end|>  11 \n  12 <|im_start|>  13 assistant  14 \n  15 Paris  16 ' is'
//   17 ' the'  18 ' capital'  19 .
const QStringList kLabels = {"<|im_start|>", "user",     "\n",           "What",      " is",
                             " the",         " capital", " of",          " France",   "?",
                             "<|im_end|>",   "\n",       "<|im_start|>", "assistant", "\n",
                             "Paris",        " is",      " the",         " capital",  "."};
const QStringList kReply = {"Paris", " is", " the", " capital", "."};
const QString kQuestion = QStringLiteral("What is the capital of France?");

QVector<QByteArray> contextPieces() {
    QVector<QByteArray> pieces;
    for (const QString& l : kLabels)
        pieces.push_back(l.startsWith("<|") ? QByteArray() : l.toUtf8());
    return pieces;
}

// Row 16 (the reply's " is") by hand: 0.50 on <|im_start|> (not shown in the chat: an attention
// sink), 0.25 on " France", 0.125 on "Paris", 0.125 on itself. Other rows: uniform.
AttentionData contextAttention() {
    AttentionData d;
    d.layer = 2;
    d.head = -1;
    d.labels = kLabels;
    d.pieces = contextPieces();
    for (int q = 0; q < kLabels.size(); ++q) {
        QVector<float> row(q + 1, 1.0f / float(q + 1));
        if (q == 16) {
            row.fill(0.0f);
            row[0] = 0.50f;
            row[8] = 0.25f;
            row[15] = 0.125f;
            row[16] = 0.125f;
        }
        d.rows.push_back(row);
    }
    return d;
}

void showConversation(ChatView& view) {
    view.addMessage(MessageRole::User, kQuestion);
    view.beginAssistantMessage();
    for (int i = 0; i < kReply.size(); ++i) view.appendToken(token(kReply[i], 100 + i));
    view.finishAssistantMessage();
    QApplication::processEvents();
}

QString selectedText(const QTextEdit::ExtraSelection& s) {
    return s.cursor.selectedText();
}

}  // namespace

class TestChatAttention : public QObject {
    Q_OBJECT

  private slots:
    // Positions map to the messages' text: template words and control tokens to nothing.
    void mapFindsMessagesAmongTheTemplate() {
        const AttentionTextMap map(contextPieces(), {kQuestion, kReply.join(QString())});
        QCOMPARE(map.positionCount(), 20);
        QCOMPARE(map.matchedMessages(), 2);
        for (int p : {0, 1, 2, 10, 11, 12, 13, 14})
            QVERIFY2(!map.span(p), qPrintable(QString::number(p)));
        QCOMPARE(*map.span(3), (Span{0, 0, 4}));     // "What"
        QCOMPARE(*map.span(8), (Span{0, 22, 29}));   // " France"
        QCOMPARE(*map.span(9), (Span{0, 29, 30}));   // "?"
        QCOMPARE(*map.span(15), (Span{1, 0, 5}));    // "Paris"
        QCOMPARE(*map.span(19), (Span{1, 20, 21}));  // "."
        QCOMPARE(map.positionAt(0, 0), 3);
        QCOMPARE(map.positionAt(0, 25), 8);   // inside " France"
        QCOMPARE(map.positionAt(1, 6), 16);   // "is" of " is"
        QCOMPARE(map.positionAt(1, 21), -1);  // past the text
        QCOMPARE(map.positionAt(2, 0), -1);   // no such message
    }

    // A short message that also occurs earlier (in the system prompt) maps to the occurrence the
    // template put before the reply, not to the first one.
    void shortMessageMatchesItsOwnOccurrence() {
        const QVector<QByteArray> pieces = {"Say", " hi", " politely", ".",
                                            "\n",  "hi",  "\n",        "Hello"};
        const AttentionTextMap map(pieces, {"hi", "Hello"});
        QVERIFY(!map.span(1));
        QCOMPARE(*map.span(5), (Span{0, 0, 2}));
        QCOMPARE(*map.span(7), (Span{1, 0, 5}));
    }

    // Templates trim messages; a token may hold part of a character (byte-level BPE splits an
    // emoji's four bytes); the reply may be only partly captured.
    void trimmedSplitCharactersAndPartialReply() {
        const QByteArray smile("\xF0\x9F\x98\x80");  // U+1F600, two UTF-16 units
        const QVector<QByteArray> pieces = {"Hello",      "\n",   "Ok", " " + smile.left(2),
                                            smile.mid(2), " then"};
        // "  Hello \n" was sent; the template stripped it. The reply goes on past the capture.
        const AttentionTextMap map(
            pieces, {"  Hello \n", "Ok " + QString::fromUtf8(smile) + " then we go"});
        QCOMPARE(map.matchedMessages(), 2);
        QCOMPARE(*map.span(0), (Span{0, 2, 7}));
        // " " + half the emoji: the space and the whole character it starts (offsets 2..5).
        QCOMPARE(*map.span(3), (Span{1, 2, 5}));
        QCOMPARE(*map.span(4), (Span{1, 3, 5}));  // the rest of the character
        QCOMPARE(*map.span(5), (Span{1, 5, 10}));
        QCOMPARE(map.positionAt(1, 11), -1);  // " we go" is not in the capture yet
    }

    void unmatchedMessagesAndLabelFallback() {
        const AttentionTextMap none(contextPieces(), {"Something else entirely"});
        QCOMPARE(none.matchedMessages(), 0);
        QCOMPARE(none.positionAt(0, 0), -1);
        // A remote server gives labels only: their UTF-8 stands in for the bytes.
        AttentionData d = contextAttention();
        d.pieces.clear();
        const auto map = AttentionTextMap::fromData(d, {kQuestion, kReply.join(QString())}, {});
        QCOMPARE(map.matchedMessages(), 2);
        QCOMPARE(*map.span(8), (Span{0, 22, 29}));
    }

    // With the prompt's length known, the reply's tokens map to their positions one to one:
    // a token holding part of a character (here the euro sign's three bytes split 1 + 2) shows
    // as U+FFFD in the chat, which no text search could match to its bytes.
    void replyTokensMapByPosition() {
        QVector<QByteArray> pieces = contextPieces().mid(0, 15);
        pieces << QByteArray("\xE2") << QByteArray("\x82\xAC") << QByteArray(" is");
        const QVector<QString> tokens = {QString(QChar::ReplacementCharacter),
                                         QString(QChar::ReplacementCharacter), " is"};
        const QString reply_text = tokens[0] + tokens[1] + tokens[2];
        const AttentionTextMap map(pieces, {kQuestion, reply_text}, {1, 15, tokens});
        QCOMPARE(map.matchedMessages(), 2);
        QCOMPARE(*map.span(15), (Span{1, 0, 1}));
        QCOMPARE(*map.span(16), (Span{1, 1, 2}));
        QCOMPARE(*map.span(17), (Span{1, 2, 5}));
        QCOMPARE(*map.span(8), (Span{0, 22, 29}));  // the question, searched in the prompt
        QCOMPARE(map.positionAt(1, 3), 17);

        // Tokens that disagree with whole-character bytes are another reply: not mapped.
        const QVector<QString> other = {"Rome", " is", " it"};
        const AttentionTextMap wrong(pieces, {kQuestion, "Rome is it"}, {1, 15, other});
        QVERIFY(!wrong.span(15));
        QVERIFY(!wrong.span(17));
        QCOMPARE(*wrong.span(8), (Span{0, 22, 29}));
    }

    // MessageDocument's text index: plain messages and token-streamed replies, folded reasoning
    // giving no range.
    void documentTextIndex() {
        MessageDocument doc;
        doc.addMessage(MessageRole::User, kQuestion);
        doc.beginAssistantMessage();
        QVector<TokenData> tokens;
        const QStringList parts = {"<think>", "Hmm", "</think>", "Paris", "!"};
        for (int i = 0; i < parts.size(); ++i) tokens.push_back(token(parts[i], i));
        doc.appendTokens(tokens);
        doc.finishAssistantMessage();
        const QString plain = doc.document()->toPlainText();

        const auto question = doc.textRanges(0, 22, 29);
        QCOMPARE(question.size(), 1);
        QCOMPARE(plain.mid(question[0].first, question[0].second - question[0].first),
                 QString(" France"));
        int message = -1;
        QCOMPARE(doc.textOffsetAt(question[0].first + 2, &message), 24);
        QCOMPARE(message, 0);

        const QString reply = doc.message(1).text;  // "<think>Hmm</think>Paris!"
        const int paris = int(reply.indexOf("Paris"));
        const auto shown = doc.textRanges(1, paris, paris + 6);
        QCOMPARE(shown.size(), 1);  // "Paris" and "!" merged
        QCOMPARE(plain.mid(shown[0].first, shown[0].second - shown[0].first), QString("Paris!"));
        QCOMPARE(doc.textOffsetAt(shown[0].first + 1, &message), paris + 1);
        QCOMPARE(message, 1);
        QVERIFY(doc.textRanges(1, 7, 10).isEmpty());  // "Hmm": folded away
        QCOMPARE(doc.textOffsetAt(doc.messageBodyRange(0).first - 1, &message), -1);  // a header
    }

    // Hovering the reply's " is" draws row 16 on the text: " France" in the question darkest
    // (the strongest shown key: the sink's larger weight does not count), "Paris" at half the
    // alpha range, the hovered token underlined; the legend states the 50 % not shown.
    void hoverDrawsTheRowOnTheText() {
        ChatView view;
        view.resize(700, 400);
        view.show();
        QVERIFY(QTest::qWaitForWindowExposed(&view));
        showConversation(view);
        view.setAttentionData(contextAttention());
        QSignalSpy toggled(&view, &ChatView::attentionOverlayChanged);
        view.setAttentionOverlay(true);
        QCOMPARE(toggled.count(), 1);
        QVERIFY(view.attentionLegendText().contains("Hover a token"));

        const QRect is_rect = view.tokenRect({1, 1});
        QVERIFY(!is_rect.isEmpty());
        QTest::mouseMove(view.transcript()->viewport(), is_rect.center() + QPoint(2, 0));
        QTRY_COMPARE(view.attentionPosition(), 16);

        const auto selections = view.transcript()->extraSelections();
        QCOMPARE(selections.size(), 3);  // " France", "Paris", the hovered " is"
        const auto find = [&](const QString& text) {
            for (const auto& s : selections)
                if (selectedText(s) == text) return s;
            return QTextEdit::ExtraSelection{};
        };
        const auto france = find(" France");
        QVERIFY(!france.cursor.isNull());
        const auto body = view.messageDocument()->messageBodyRange(0);
        QVERIFY(france.cursor.selectionStart() >= body.first &&
                france.cursor.selectionEnd() <= body.second);
        QCOMPARE(france.format.background().color().alpha(), 240);         // 36 + 204 * 0.40 / 0.40
        QCOMPARE(find("Paris").format.background().color().alpha(), 138);  // 36 + 204 * 0.5
        QVERIFY(find(" is").format.fontUnderline());
        const QString legend = view.attentionLegendText();
        QVERIFY2(legend.contains(QString::fromUtf8("‘<|im_start|>’ 50%, ‘·France’ 25%")),
                 qPrintable(legend));
        QVERIFY2(legend.contains(QString::fromUtf8("50% on text not shown")), qPrintable(legend));
        QVERIFY2(legend.contains("Layer 2, mean of heads"), qPrintable(legend));

        // The question's "What" (row 3, uniform over 4 keys, the only shown one being itself):
        // nothing else to tint, only the frame.
        QTextCursor what(view.messageDocument()->document());
        what.setPosition(body.first + 2);  // between "Wh" and "at"
        const QPoint what_point = view.transcript()->cursorRect(what).center() - QPoint(3, 0);
        QCOMPARE(view.characterAt(what_point), body.first + 1);  // the 'h'
        QTest::mouseMove(view.transcript()->viewport(), what_point);
        QTRY_COMPARE(view.attentionPosition(), 3);
        QCOMPARE(view.transcript()->extraSelections().size(), 1);

        // Off: nothing drawn, the legend hidden.
        view.setAttentionOverlay(false);
        QVERIFY(view.transcript()->extraSelections().isEmpty());
        QCOMPARE(view.attentionPosition(), -1);
        QVERIFY(!view.findChild<QLabel*>("attentionLegend")->isVisible());
    }

    // New data (the panel chose another layer) redraws in place; a new conversation clears.
    void newDataRedrawsAndMessagesClear() {
        ChatView view;
        view.resize(700, 400);
        view.show();
        QVERIFY(QTest::qWaitForWindowExposed(&view));
        showConversation(view);
        view.setAttentionOverlay(true);
        QVERIFY(view.attentionLegendText().contains("captured while the model answers"));
        view.setAttentionData(contextAttention());
        const auto range = view.messageDocument()->tokenRange({1, 1});
        view.showAttentionAt(range.first + 1);
        QCOMPARE(view.attentionPosition(), 16);
        AttentionData other = contextAttention();
        other.layer = 5;
        other.rows[16].fill(0.0f);
        other.rows[16][3] = 1.0f;  // all on "What"
        view.setAttentionData(other);
        const auto selections = view.transcript()->extraSelections();
        QCOMPARE(selections.size(), 2);
        QCOMPARE(selectedText(selections[0]), QString("What"));
        QVERIFY(view.attentionLegendText().contains("Layer 5"));
        view.setMessages({});
        QVERIFY(view.transcript()->extraSelections().isEmpty());
        QCOMPARE(view.attentionPosition(), -1);
    }
};

QTEST_MAIN(TestChatAttention)
#include "test_chat_attention.moc"
