// ThinkSplitter: which characters of a streamed reply are reasoning, tags or answer, decided as
// the text arrives piece by piece (tags split over tokens included).
#include <QTest>

#include "think_section.h"

using tokenscope::ui::ThinkSplitter;
using Part = ThinkSplitter::Part;

namespace {

// One letter per character: t(ag), r(easoning), a(nswer).
QString parts(const ThinkSplitter& s, int n) {
    QString out;
    for (int i = 0; i < n; ++i) {
        const Part p = s.partAt(i);
        out += p == Part::Tag ? u't' : p == Part::Thinking ? u'r' : u'a';
    }
    return out;
}

// Feeds `pieces` one at a time, then completes. Checks on the way that a decided character
// never changes its part (except after restarted()), and returns the final parts.
QString stream(ThinkSplitter& s, const QStringList& pieces, int* restarts = nullptr) {
    QString text;
    QString seen;
    for (const QString& piece : pieces) {
        text += piece;
        s.advance(text, false);
        if (s.restarted()) {
            if (restarts) ++*restarts;
            seen.clear();
        }
        const QString now = parts(s, s.decided());
        if (!now.startsWith(seen)) {
            qWarning("part changed: %s -> %s", qPrintable(seen), qPrintable(now));
            return QStringLiteral("<unstable>");
        }
        seen = now;
    }
    s.advance(text, true);
    if (s.decided() != text.size()) return QStringLiteral("<undecided>");
    return parts(s, int(text.size()));
}

QStringList chars(const QString& text) {
    QStringList out;
    for (const QChar c : text) out << QString(c);
    return out;
}

}  // namespace

class TestThinkSection : public QObject {
    Q_OBJECT
  private slots:
    void qwenReplySplitsIntoTagsReasoningAndAnswer() {
        const QString text = QStringLiteral("<think>\nHmm.\n</think>\n\nHi!");
        const QString expected = QStringLiteral(
            "ttttttt"
            "t"
            "rrrr"
            "t"
            "tttttttt"
            "tt"
            "aaa");
        // Whole, as pieces, and one character at a time: the same answer.
        for (const QStringList& pieces :
             {QStringList{text},
              QStringList{"<th", "ink", ">\n", "Hmm", ".\n</", "thi", "nk>", "\n\n", "Hi", "!"},
              chars(text)}) {
            ThinkSplitter s;
            QCOMPARE(stream(s, pieces), expected);
            QVERIFY(s.hasSection());
            QVERIFY(s.hasReasoning());
            QCOMPARE(s.sectionBegin(), 7);
            QCOMPARE(s.closeTagBegin(), int(text.indexOf(QStringLiteral("</think>"))));
        }
    }

    void partialTagIsHeldBackUntilDecided() {
        ThinkSplitter s;
        s.advance(u"<th", false);
        QCOMPARE(s.decided(), 0);  // may be "<think>"
        s.advance(u"<think>\nWell</", false);
        // "Well" is reasoning; the "</" may close it, so it waits.
        QCOMPARE(s.decided(), int(QStringView(u"<think>\nWell").size()));
        QCOMPARE(s.partAt(8), Part::Thinking);
        s.advance(u"<think>\nWell</b> is bold", false);
        QCOMPARE(s.partAt(12), Part::Thinking);  // "</b>" was not a tag
        QCOMPARE(s.closeTagBegin(), -1);
    }

    void htmlAnswerIsNotMistakenForATag() {
        ThinkSplitter s;
        const QString text = QStringLiteral("<th>Name</th>");
        QCOMPARE(stream(s, chars(text)), QString(text.size(), u'a'));
        QVERIFY(!s.hasSection());
    }

    void replyWithoutTagsIsAllAnswer() {
        ThinkSplitter s;
        const QString text = QStringLiteral("  Hello <b>there</b>\n");
        QCOMPARE(stream(s, chars(text)), QString(text.size(), u'a'));
        QVERIFY(!s.hasSection());
        // And nothing waits except a possible "</think>" start.
        ThinkSplitter live;
        live.advance(u"Hello", false);
        QCOMPARE(live.decided(), 5);
    }

    void emptyThinkBlockHasNoReasoning() {
        ThinkSplitter s;
        const QString text = QStringLiteral("<think>\n\n</think>\n\nHi");
        QCOMPARE(stream(s, {"<think>", "\n\n", "</think>", "\n\n", "Hi"}),
                 QString(text.size() - 2, u't') + QStringLiteral("aa"));
        QVERIFY(s.hasSection());
        QVERIFY(!s.hasReasoning());
    }

    // The template wrote "<think>" into the prompt: the reply starts with the reasoning and is
    // recognised as such when "</think>" arrives.
    void openingTagInThePrompt() {
        ThinkSplitter s;
        int restarts = 0;
        const QString text = QStringLiteral("Okay.\n</think>\n\nYes");
        QCOMPARE(stream(s, {"Okay", ".\n", "</", "think", ">\n\n", "Yes"}, &restarts),
                 QStringLiteral("rrrrr"
                                "t"
                                "tttttttt"
                                "tt"
                                "aaa"));
        QCOMPARE(restarts, 1);
        QCOMPARE(s.sectionBegin(), 0);
        // Whole: found at once, nothing to undo.
        ThinkSplitter whole;
        whole.advance(text, true);
        QVERIFY(!whole.restarted());
        QCOMPARE(whole.partAt(0), Part::Thinking);
    }

    void onlyTheFirstCloseTagCounts() {
        ThinkSplitter s;
        QCOMPARE(stream(s, {"<think>", "a", "</think>", "b</think>"}),
                 QString(7, u't') + u'r' + QString(8, u't') + QString(9, u'a'));
    }

    void stoppedMidThought() {
        ThinkSplitter s;
        // The partial tag at the end turns out to be reasoning text; trailing space is hidden.
        QCOMPARE(stream(s, {"<think>", "\n", "Let me see", " </th", "\n"}),
                 QString(8, u't') + QString(15, u'r') + u't');
        QVERIFY(s.hasReasoning());
        QCOMPARE(s.closeTagBegin(), -1);
        QVERIFY(s.complete());
    }

    void disabledIsAllAnswer() {
        ThinkSplitter s(false);
        const QString text = QStringLiteral("<think>x</think>y");
        s.advance(text, false);
        QCOMPARE(parts(s, s.decided()), QString(text.size(), u'a'));
        QVERIFY(!s.hasSection());
    }
};

QTEST_GUILESS_MAIN(TestThinkSection)
#include "test_think_section.moc"
