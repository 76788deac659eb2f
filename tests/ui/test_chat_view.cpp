// ChatView: streaming without stalling the event loop, exact token hit-testing, tooltips,
// colour by probability, code blocks, the input box's keys, edit/regenerate, and a screenshot.
#include <QAbstractTextDocumentLayout>
#include <QApplication>
#include <QClipboard>
#include <QDir>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QHelpEvent>
#include <QLabel>
#include <QPushButton>
#include <QScrollBar>
#include <QSignalSpy>
#include <QTest>
#include <QTextBlock>
#include <QTextBrowser>
#include <QTextCursor>
#include <QTextDocument>
#include <QThread>
#include <QTimer>
#include <QToolButton>
#include <QToolTip>
#include <atomic>
#include <cmath>

#include "chat_view.h"
#include "message_document.h"
#include "panel_data.h"
#include "widget_test_support.h"

using namespace tokenscope::ui;

namespace {

const QString kShotDir = QStringLiteral("/tmp/tokenscope-panels");

// A token with a plausible trace: ten "before" alternatives (the chosen one among them) and the
// shaped "after" list.
TokenData makeToken(const QString& text, float p, int id) {
    TokenData t;
    t.id = id;
    t.text = text;
    t.probability = p;
    t.logprob = std::log(std::max(p, 1e-6f)) - 0.05f;
    t.step_ms = 11.5;
    static const char* alternatives[] = {" the", " a",  " of", ",",   " and",
                                         ".",    " to", " in", " is", " that"};
    float rest = 1.0f - p;
    t.before.push_back({id, text, p * 0.9f, 5.0f});
    for (int i = 0; i < 9; ++i) {
        const float q = rest * 0.5f;
        rest -= q;
        t.before.push_back({1000 + i, QString::fromLatin1(alternatives[i]), q, 4.0f - i});
    }
    t.after = t.before.mid(0, 4);
    t.after[0].probability = p;
    return t;
}

class Producer : public QObject {
    Q_OBJECT
  signals:
    void token(const tokenscope::ui::TokenData& token);
};

QString sampleWord(int i) {
    static const char* words[] = {" The",   " model",  " predicts", " one",    " token",
                                  " at",    " a",      " time",     ",",       " and",
                                  " every", " choice", " has",      " a",      " probability",
                                  ".",      "\n",      " Sampling", " shapes", " it."};
    return QString::fromLatin1(words[i % 20]);
}

// A user message and a finished reply of `pieces` (token ids first_id, first_id + 1, ...).
void showReply(ChatView& view, const QStringList& pieces, int first_id) {
    view.addMessage(MessageRole::User, QStringLiteral("Say something."));
    view.beginAssistantMessage();
    for (int i = 0; i < pieces.size(); ++i)
        view.appendToken(makeToken(pieces[i], 0.5f, first_id + i));
    view.finishAssistantMessage();
    QApplication::processEvents();
}

}  // namespace

class TestChatView : public QObject {
    Q_OBJECT
  private slots:
    void initTestCase() {
        register_panel_types();
        QDir().mkpath(kShotDir);
    }

    // 2,000 tokens from a worker thread at full speed through a queued signal (as the
    // InferenceWorker delivers them). A 0 ms timer runs once per event-loop iteration; the
    // longest interval between two of its ticks is the longest stall.
    void streamingNeverStallsTheEventLoop() {
        ChatView view;
        view.resize(900, 700);
        view.show();
        QVERIFY(QTest::qWaitForWindowExposed(&view));
        view.addMessage(MessageRole::User, QStringLiteral("Explain sampling."));
        view.beginAssistantMessage();

        constexpr int kTokens = 2000;
        Producer producer;
        connect(&producer, &Producer::token, &view, &ChatView::appendToken, Qt::QueuedConnection);
        int flushes = 0;
        connect(view.messageDocument()->document(), &QTextDocument::contentsChanged, this,
                [&] { ++flushes; });

        std::atomic<bool> produced{false};
        QThread* thread = QThread::create([&] {
            for (int i = 0; i < kTokens; ++i) {
                QString text = sampleWord(i);
                if (i % 400 == 200) text = QStringLiteral("\n```cpp\n");
                if (i % 400 == 260) text = QStringLiteral("\n```\n");
                emit producer.token(makeToken(text, float((i * 37) % 100) / 100.0f, i));
            }
            produced = true;
        });

        QEventLoop loop;
        QElapsedTimer clock;
        qint64 last = 0;
        qint64 max_gap = 0;
        qint64 iterations = 0;
        QTimer tick;
        tick.setInterval(0);
        connect(&tick, &QTimer::timeout, &loop, [&] {
            const qint64 now = clock.nsecsElapsed();
            max_gap = std::max(max_gap, now - last);
            last = now;
            ++iterations;
            const int have = view.message(1).tokens.size();
            if ((produced && have == kTokens && view.pendingTokenCount() == 0) ||
                clock.elapsed() > 30000)
                loop.quit();
        });
        clock.start();
        tick.start();
        thread->start();
        loop.exec();
        thread->wait();
        delete thread;

        QCOMPARE(view.message(1).tokens.size(), kTokens);
        const double max_gap_ms = double(max_gap) / 1e6;
        qInfo(
            "streamed %d tokens in %lld ms: %d document updates (coalesced), %lld event-loop "
            "iterations, longest gap between iterations %.2f ms",
            kTokens, qint64(clock.elapsed()), flushes, iterations, max_gap_ms);
        QVERIFY2(flushes < kTokens / 4, "tokens were not coalesced per frame");
        QVERIFY2(
            max_gap_ms < 50.0,
            qPrintable(QStringLiteral("event loop stalled for %1 ms").arg(max_gap_ms, 0, 'f', 2)));
    }

    void hitTestingIsExact() {
        ChatView view;
        view.resize(500, 400);
        view.show();
        QVERIFY(QTest::qWaitForWindowExposed(&view));
        const QStringList pieces = {QStringLiteral("W"),     QStringLiteral("ell"),
                                    QStringLiteral(","),     QStringLiteral(" i"),
                                    QStringLiteral("t"),     QStringLiteral(" works"),
                                    QStringLiteral("\n"),    QStringLiteral("Second"),
                                    QStringLiteral(" line"), QStringLiteral("!")};
        showReply(view, pieces, 100);
        MessageDocument* doc = view.messageDocument();

        // Every character position maps to the token that contains it.
        for (int t = 0; t < pieces.size(); ++t) {
            const auto [start, end] = doc->tokenRange({1, t});
            QCOMPARE(end - start, int(pieces[t].size()));
            for (int pos = start; pos < end; ++pos)
                QCOMPARE(doc->tokenAtPosition(pos), (TokenRef{1, t}));
        }
        // Outside the answer: no token.
        QVERIFY(!doc->tokenAtPosition(doc->messageBodyRange(0).first).valid());
        QVERIFY(!doc->tokenAtPosition(doc->messageBodyRange(1).second).valid());

        // Points: left and right edge of each token's first character (the right half of a
        // character must still be that character, not the gap after it).
        for (int t = 0; t < pieces.size(); ++t) {
            if (pieces[t] == QStringLiteral("\n")) continue;
            const QRect r = view.tokenRect({1, t});
            QVERIFY2(!r.isEmpty(), qPrintable(pieces[t]));
            const QPoint left(r.left() + 1, r.center().y());
            const QPoint right(r.right() - 1, r.center().y());
            QCOMPARE(view.tokenAt(left), (TokenRef{1, t}));
            QCOMPARE(view.tokenAt(right), (TokenRef{1, t}));
            QCOMPARE(view.characterAt(left), doc->tokenRange({1, t}).first);
        }
        // Far right of a short line and on the role header: nothing.
        const QRect bang = view.tokenRect({1, 9});
        QVERIFY(!view.tokenAt(QPoint(bang.right() + 200, bang.center().y())).valid());
        QVERIFY(!view.tokenAt(QPoint(2, 2)).valid());

        // A click on a token reports it.
        QSignalSpy clicked(&view, &ChatView::tokenClicked);
        QSignalSpy selected(&view, &ChatView::tokenSelected);
        QTest::mouseClick(view.transcript()->viewport(), Qt::LeftButton, {},
                          view.tokenRect({1, 5}).center());
        QCOMPARE(clicked.count(), 1);
        QCOMPARE(clicked.at(0).at(0).toInt(), 1);
        QCOMPARE(clicked.at(0).at(1).toInt(), 5);
        QCOMPARE(selected.at(0).at(0).value<TokenData>().id, 105);
    }

    // A reply that starts with a right-to-left token makes a right-aligned paragraph: its tokens
    // are still found where they are drawn (the text's extent comes from the line's natural
    // rectangle, alignment included, not from the line's left edge).
    void hitTestingFindsRightToLeftText() {
        ChatView view;
        view.resize(500, 400);
        view.show();
        QVERIFY(QTest::qWaitForWindowExposed(&view));
        // Arabic "kitab" (book) in three tokens, then a neutral one.
        const QStringList pieces = {QString(QChar(0x0643)), QString(QChar(0x062A)) + QChar(0x0627),
                                    QString(QChar(0x0628)), QStringLiteral("!")};
        showReply(view, pieces, 200);
        const QRect first = view.tokenRect({1, 0});
        QVERIFY(!first.isEmpty());
        QVERIFY2(
            first.left() > view.width() / 2,
            qPrintable(QString("the paragraph is not right-aligned: x = %1").arg(first.left())));
        for (int t = 0; t < pieces.size(); ++t) {
            const QRect r = view.tokenRect({1, t});
            QVERIFY2(!r.isEmpty(), qPrintable(pieces[t]));
            QCOMPARE(view.tokenAt(r.center()), (TokenRef{1, t}));
        }
    }

    void hitTestingIsFastOnALongAnswer() {
        ChatView view;
        view.resize(700, 500);
        view.show();
        QVERIFY(QTest::qWaitForWindowExposed(&view));
        view.beginAssistantMessage();
        for (int i = 0; i < 5000; ++i) view.appendToken(makeToken(sampleWord(i), 0.5f, i));
        view.finishAssistantMessage();
        view.transcript()->verticalScrollBar()->setValue(
            view.transcript()->verticalScrollBar()->maximum() / 2);
        QApplication::processEvents();
        QElapsedTimer timer;
        timer.start();
        int found = 0;
        for (int y = 0; y < 400; y += 4)
            for (int x = 0; x < 600; x += 30) found += view.tokenAt(QPoint(x, y)).valid();
        const double us = double(timer.nsecsElapsed()) / 1e3 / (100 * 20);
        qInfo("hit-test: %.1f us per lookup on a 5,000-token answer (%d hits)", us, found);
        QVERIFY(found > 100);
    }

    void tooltipShowsProbabilityAndAlternatives() {
        ChatView view;
        view.resize(600, 400);
        view.show();
        QVERIFY(QTest::qWaitForWindowExposed(&view));
        view.beginAssistantMessage();
        view.appendToken(makeToken(QStringLiteral("Hello"), 0.42f, 7));
        view.appendToken(makeToken(QStringLiteral(" world"), 0.0371f, 8));
        view.finishAssistantMessage();

        const TokenRef ref{0, 1};
        const QString tip = view.tokenToolTip(ref);
        QVERIFY2(tip.contains(QStringLiteral("3.71%")), qPrintable(tip));
        QVERIFY(tip.contains(formatProbability(view.tokenData(ref)->probability)));
        QVERIFY(tip.contains(QStringLiteral("logprob")));
        QVERIFY(tip.contains(QStringLiteral("before sampling settings")));
        QVERIFY(tip.contains(QStringLiteral("after sampling settings")));
        // All ten alternatives before shaping, whitespace made visible.
        for (const CandidateData& c : view.tokenData(ref)->before)
            QVERIFY2(tip.contains(visiblePiece(c.piece).toHtmlEscaped()), qPrintable(c.piece));
        QVERIFY(tip.contains(formatProbability(view.tokenData(ref)->before[3].probability)));

        // The same text through a real tooltip event on the viewport.
        QWidget* viewport = view.transcript()->viewport();
        const QPoint at = view.tokenRect(ref).center();
        QHelpEvent help(QEvent::ToolTip, at, viewport->mapToGlobal(at));
        QApplication::sendEvent(viewport, &help);
        QTRY_VERIFY(QToolTip::isVisible());
        QCOMPARE(QToolTip::text(), tip);
        QToolTip::hideText();
    }

    void colourByProbabilityTintsUnlikelyTokens() {
        ChatView view;
        view.resize(600, 300);
        view.show();
        QVERIFY(QTest::qWaitForWindowExposed(&view));
        view.beginAssistantMessage();
        view.appendToken(makeToken(QStringLiteral("Certain"), 0.99f, 1));
        view.appendToken(makeToken(QStringLiteral(" unlikely"), 0.02f, 2));
        view.finishAssistantMessage();
        MessageDocument* doc = view.messageDocument();
        auto formatOf = [&](int token) {
            QTextCursor c(doc->document());
            c.setPosition(doc->tokenRange({0, token}).first + 1);  // format of the char before
            return c.charFormat();
        };
        auto meanColour = [&](const QRect& r) {
            const QImage img = view.transcript()->viewport()->grab(r).toImage();
            double sum[3] = {0, 0, 0};
            for (int y = 0; y < img.height(); ++y)
                for (int x = 0; x < img.width(); ++x) {
                    const QColor c = img.pixelColor(x, y);
                    sum[0] += c.red();
                    sum[1] += c.green();
                    sum[2] += c.blue();
                }
            const double n = img.width() * img.height();
            return QColor(int(sum[0] / n), int(sum[1] / n), int(sum[2] / n));
        };
        const QRect span = view.tokenRect({0, 1});
        const QColor before = meanColour(span);
        QCOMPARE(formatOf(1).background().style(), Qt::NoBrush);

        QSignalSpy toggled(&view, &ChatView::colorByProbabilityChanged);
        view.setColorByProbability(true);
        QCOMPARE(toggled.count(), 1);
        QApplication::processEvents();
        const QColor tint = formatOf(1).background().color();
        QCOMPARE(tint, MessageDocument::probabilityTint(0.02f));
        QVERIFY(tint.alpha() > 100);
        QVERIFY(tint.hue() < 30);  // red / orange
        // A near-certain token stays (almost) untinted.
        QVERIFY(formatOf(0).background().color().alpha() < 10);
        // And the pixels changed: the span is redder than it was.
        const QColor after = meanColour(span);
        QVERIFY2(after.red() - after.green() > before.red() - before.green() + 10,
                 qPrintable(QStringLiteral("%1 -> %2").arg(before.name(), after.name())));

        view.setColorByProbability(false);
        QCOMPARE(formatOf(1).background().style(), Qt::NoBrush);

        view.setShowTokenBoundaries(true);
        QCOMPARE(formatOf(0).underlineStyle(), QTextCharFormat::SingleUnderline);
        QVERIFY(formatOf(0).underlineColor() != formatOf(1).underlineColor());
    }

    // Tokens that were an accepted speculative guess carry the teal underline; the model's
    // own tokens (plain, correction, bonus) do not. Boundaries, when on, take the underline,
    // and switching them off brings the marking back. The legend shows on request.
    void acceptedGuessesAreUnderlined() {
        ChatView view;
        view.resize(600, 300);
        view.show();
        QVERIFY(QTest::qWaitForWindowExposed(&view));
        auto step = std::make_shared<SpeculationStepData>();
        step->k = 3;
        step->accepted = 2;
        step->tokens = 3;
        const TokenOrigin origins[] = {TokenOrigin::Plain, TokenOrigin::Accepted,
                                       TokenOrigin::Accepted, TokenOrigin::Corrected};
        view.beginAssistantMessage();
        for (int i = 0; i < 4; ++i) {
            TokenData t = makeToken(sampleWord(i), 0.9f, 10 + i);
            t.origin = origins[i];
            if (i > 0) t.speculation = step;
            view.appendToken(t);
        }
        view.finishAssistantMessage();
        MessageDocument* doc = view.messageDocument();
        auto formatOf = [&](int token) {
            QTextCursor c(doc->document());
            c.setPosition(doc->tokenRange({0, token}).first + 1);
            return c.charFormat();
        };
        QCOMPARE(formatOf(0).underlineStyle(), QTextCharFormat::NoUnderline);
        for (int i : {1, 2}) {
            QCOMPARE(formatOf(i).underlineStyle(), QTextCharFormat::SingleUnderline);
            QCOMPARE(formatOf(i).underlineColor(), MessageDocument::acceptedGuessColor());
        }
        QCOMPARE(formatOf(3).underlineStyle(), QTextCharFormat::NoUnderline);
        // And it is painted in that colour (the format alone once gave a text-coloured line).
        {
            const QColor teal = MessageDocument::acceptedGuessColor();
            auto near_teal = [&](QColor c) {
                return std::abs(c.red() - teal.red()) < 40 &&
                       std::abs(c.green() - teal.green()) < 40 &&
                       std::abs(c.blue() - teal.blue()) < 40;
            };
            const QImage shot = view.transcript()->viewport()->grab().toImage();
            int teal_pixels = 0;
            for (int y = 0; y < shot.height(); ++y)
                for (int x = 0; x < shot.width(); ++x)
                    teal_pixels += near_teal(shot.pixelColor(x, y));
            QVERIFY2(teal_pixels >= 10,
                     qPrintable(QStringLiteral("%1 teal pixels").arg(teal_pixels)));
        }
        // The token keeps its origin and step for the inspector.
        QCOMPARE(doc->message(0).tokens[1].origin, TokenOrigin::Accepted);
        QCOMPARE(doc->message(0).tokens[1].speculation->accepted, 2);

        view.setShowTokenBoundaries(true);
        QVERIFY(formatOf(1).underlineColor() != MessageDocument::acceptedGuessColor() ||
                formatOf(2).underlineColor() != MessageDocument::acceptedGuessColor());
        QCOMPARE(formatOf(0).underlineStyle(), QTextCharFormat::SingleUnderline);
        view.setShowTokenBoundaries(false);
        QCOMPARE(formatOf(0).underlineStyle(), QTextCharFormat::NoUnderline);
        QCOMPARE(formatOf(2).underlineColor(), MessageDocument::acceptedGuessColor());

        auto* legend = view.findChild<QLabel*>(QStringLiteral("speculationLegend"));
        QVERIFY(legend);
        QVERIFY(!legend->isVisible());
        view.setSpeculationLegendVisible(true);
        QVERIFY(legend->isVisible());
        QVERIFY(legend->text().contains(MessageDocument::acceptedGuessColor().name()));
        QVERIFY(legend->text().contains(QStringLiteral("accepted guess")));
    }

    // "Copy code block" (the context menu) copies a block's code without its fence lines, for a
    // plain message and for a streamed reply whose fence came split over tokens; prose around
    // it is no code block.
    void codeBlockTextWithoutFences() {
        ChatView view;
        view.addMessage(MessageRole::Assistant,
                        QStringLiteral("Here:\n```python\nx = 1\nprint(x)\n```\nDone."));
        view.beginAssistantMessage();
        for (const char* piece : {"Try", ":\n", "``", "`sh", "\nls -l", "\n``", "`\n", "ok"})
            view.appendToken(makeToken(QString::fromLatin1(piece), 0.5f, 1));
        view.finishAssistantMessage();
        QTextDocument* doc = view.messageDocument()->document();
        const auto at = [&](const QString& text) {
            return view.messageDocument()->codeBlockAt(doc->find(text).selectionStart());
        };
        QCOMPARE(at("print"), QString("x = 1\nprint(x)"));
        QCOMPARE(at("```python"), QString("x = 1\nprint(x)"));  // on the fence line too
        QCOMPARE(at("ls -l"), QString("ls -l"));
        QCOMPARE(at("Done."), QString());
        QCOMPARE(at("Here"), QString());
        QCOMPARE(at("ok"), QString());
    }

    // Hovering a code block brings up its Copy button at the block's top-right corner; a click
    // copies the code without its fences; hovering prose hides it. The reply's "Copy as text"
    // link copies it with the markdown rendered away.
    void codeBlockCopyButtonAndPlainCopy() {
        ChatView view;
        view.resize(700, 500);
        view.show();
        QVERIFY(QTest::qWaitForWindowExposed(&view));
        const QString reply =
            QStringLiteral("Run **this**:\n```python\nx = 1\nprint(x)\n```\nDone.");
        view.addMessage(MessageRole::User, QStringLiteral("Show me"));
        view.addMessage(MessageRole::Assistant, reply);
        view.setMessageNote(1, QStringLiteral("test"));
        QToolButton* button = view.codeCopyButton();
        QVERIFY(button && button->isHidden());
        QWidget* viewport = view.transcript()->viewport();
        QTextDocument* doc = view.messageDocument()->document();
        const auto rect_at = [&](int pos) {
            QTextCursor c(doc);
            c.setPosition(pos);
            return view.transcript()->cursorRect(c);
        };
        const auto point_at = [&](const QString& text) {
            return rect_at(doc->find(text).selectionStart()).center() + QPoint(3, 0);
        };
        QTest::mouseMove(viewport, point_at("print"));
        QTRY_VERIFY(button->isVisible());
        // Right of the code, no lower than its first line, inside the viewport.
        QVERIFY(button->geometry().left() > rect_at(doc->find("print(x)").selectionEnd()).right());
        QVERIFY(button->geometry().top() <= point_at("x = 1").y());
        QVERIFY(viewport->rect().contains(button->geometry()));
        QGuiApplication::clipboard()->setText(QStringLiteral("before"));
        QTest::mouseClick(button, Qt::LeftButton);
        QCOMPARE(QGuiApplication::clipboard()->text(), QStringLiteral("x = 1\nprint(x)"));
        QCOMPARE(button->text(), QStringLiteral("Copied"));
        QTest::mouseMove(viewport, point_at("Done"));
        QTRY_VERIFY(button->isHidden());
        QTest::mouseMove(viewport, point_at("Run"));
        QVERIFY(button->isHidden());
        // A one-line block without a language label gets one too.
        view.addMessage(MessageRole::Assistant, QStringLiteral("Then:\n```\nls -l\n```\nok"));
        QTest::mouseMove(viewport, point_at("ls -l"));
        QTRY_VERIFY(button->isVisible());
        QTest::mouseClick(button, Qt::LeftButton);
        QCOMPARE(QGuiApplication::clipboard()->text(), QStringLiteral("ls -l"));
        QTest::mouseMove(viewport, point_at("Then"));
        QTRY_VERIFY(button->isHidden());

        const auto [link_start, link_end] = view.messageDocument()->copyTextLinkRange(1);
        QVERIFY(link_start >= 0 && link_end > link_start);
        QTest::mouseClick(viewport, Qt::LeftButton, {},
                          rect_at(link_start).center() + QPoint(4, 0));
        QTRY_COMPARE(QGuiApplication::clipboard()->text(), ChatView::markdownToPlainText(reply));
        const QString plain = QGuiApplication::clipboard()->text();
        QVERIFY2(!plain.contains("**") && !plain.contains("```") && plain.contains("print(x)"),
                 qPrintable(plain));
    }

    void codeBlocksAreMonospace() {
        ChatView view;
        view.addMessage(MessageRole::Assistant,
                        QStringLiteral("Here:\n```cpp\nint x = 1;\n```\nDone."));
        // Streamed, with the fence split across tokens.
        view.beginAssistantMessage();
        for (const char* piece :
             {"Try", ":\n", "``", "`py", "thon\n", "y = 2", "\n``", "`\n", "ok"})
            view.appendToken(makeToken(QString::fromLatin1(piece), 0.5f, 1));
        view.finishAssistantMessage();
        QTextDocument* doc = view.messageDocument()->document();
        auto charFormatAt = [&](const QString& text, int from = 0) {
            const QTextCursor found = doc->find(text, from);
            [&] { QVERIFY2(!found.isNull(), qPrintable(text)); }();
            QTextCursor c(doc);
            c.setPosition(found.selectionStart() + 1);
            return std::make_pair(c.charFormat(), c.block().blockFormat());
        };
        const QString mono = MessageDocument::codeFont(doc->defaultFont()).family();
        for (const QString& code :
             {QStringLiteral("int x"), QStringLiteral("y = 2"), QStringLiteral("``")}) {
            const auto [chars, block] = charFormatAt(code);
            QVERIFY2(chars.fontFixedPitch(), qPrintable(code));
            QCOMPARE(chars.fontFamilies().toStringList().value(0), mono);
            // Monospace as the reader sees it: equal advances. (Not QFontInfo::fixedPitch(): Qt
            // reports false for Noto Sans Mono, which fontconfig picks for "monospace" where
            // fonts-noto-mono is installed, though every glyph of it has the same advance.)
            const QFontMetricsF metrics(chars.font());
            QCOMPARE(metrics.horizontalAdvance(QLatin1Char('i')),
                     metrics.horizontalAdvance(QLatin1Char('W')));
            QCOMPARE(metrics.horizontalAdvance(QLatin1Char('.')),
                     metrics.horizontalAdvance(QLatin1Char('m')));
            QVERIFY(block.background().style() != Qt::NoBrush);  // the subtle code background
        }
        for (const QString& prose : {QStringLiteral("Done."), QStringLiteral("Here"),
                                     QStringLiteral("ok"), QStringLiteral("Try")}) {
            const auto [chars, block] = charFormatAt(prose);
            QVERIFY2(!chars.fontFixedPitch(), qPrintable(prose));
            QCOMPARE(block.background().style(), Qt::NoBrush);
        }
    }

    void enterSendsShiftEnterBreaksEscStops() {
        ChatView view;
        view.show();
        QVERIFY(QTest::qWaitForWindowExposed(&view));
        ChatInput* input = view.input();
        input->setFocus();
        QSignalSpy send(&view, &ChatView::sendRequested);
        QSignalSpy stop(&view, &ChatView::stopRequested);

        QTest::keyClicks(input, QStringLiteral("first"));
        QTest::keyClick(input, Qt::Key_Return, Qt::ShiftModifier);
        QTest::keyClicks(input, QStringLiteral("second"));
        QCOMPARE(input->toPlainText(), QStringLiteral("first\nsecond"));
        QCOMPARE(send.count(), 0);
        QTest::keyClick(input, Qt::Key_Return);
        QCOMPARE(send.count(), 1);
        QCOMPARE(send.at(0).at(0).toString(), QStringLiteral("first\nsecond"));
        QVERIFY(input->toPlainText().isEmpty());

        // While generating: Send is disabled and Enter does not send; Esc and Stop stop.
        view.setGenerating(true);
        QTest::keyClicks(input, QStringLiteral("next"));
        QVERIFY(!view.sendButton()->isEnabled());
        QVERIFY(view.stopButton()->isEnabled());
        QTest::keyClick(input, Qt::Key_Return);
        QCOMPARE(send.count(), 1);
        QTest::keyClick(input, Qt::Key_Escape);
        QCOMPARE(stop.count(), 1);
        QTest::mouseClick(view.stopButton(), Qt::LeftButton);
        QCOMPARE(stop.count(), 2);
        view.setGenerating(false);
        QVERIFY(view.sendButton()->isEnabled());
        QVERIFY(!view.stopButton()->isEnabled());
        QTest::keyClick(input, Qt::Key_Enter);  // keypad Enter too
        QCOMPARE(send.count(), 2);
        QCOMPARE(send.at(1).at(0).toString(), QStringLiteral("next"));
    }

    void editAndRegenerate() {
        ChatView view;
        view.show();
        QVERIFY(QTest::qWaitForWindowExposed(&view));
        view.addMessage(MessageRole::System, QStringLiteral("Be brief."));
        view.addMessage(MessageRole::User, QStringLiteral("Hi"));
        view.addMessage(MessageRole::Assistant, QStringLiteral("Hello!"));
        QSignalSpy regenerate(&view, &ChatView::regenerateRequested);
        QSignalSpy edit(&view, &ChatView::editRequested);
        QSignalSpy send(&view, &ChatView::sendRequested);

        QVERIFY(view.regenerateButton()->isEnabled());
        QTest::mouseClick(view.regenerateButton(), Qt::LeftButton);
        QCOMPARE(regenerate.count(), 1);
        view.setGenerating(true);
        QVERIFY(!view.regenerateButton()->isEnabled());
        view.setGenerating(false);

        view.input()->setPlainText(QStringLiteral("draft"));
        view.beginEdit(2);  // not a user message: ignored
        QCOMPARE(view.editingMessage(), -1);
        view.beginEdit(1);
        QCOMPARE(view.editingMessage(), 1);
        QCOMPARE(view.input()->toPlainText(), QStringLiteral("Hi"));
        QTest::keyClick(view.input(), Qt::Key_Escape);  // cancels, restores the draft
        QCOMPARE(view.editingMessage(), -1);
        QCOMPARE(view.input()->toPlainText(), QStringLiteral("draft"));

        view.beginEdit(1);
        view.input()->moveCursor(QTextCursor::End);
        QTest::keyClicks(view.input(), QStringLiteral(" there"));
        QTest::keyClick(view.input(), Qt::Key_Return);
        QCOMPARE(edit.count(), 1);
        QCOMPARE(edit.at(0).at(0).toInt(), 1);
        QCOMPARE(edit.at(0).at(1).toString(), QStringLiteral("Hi there"));
        QCOMPARE(send.count(), 0);
    }

    // Streaming output keeps the transcript at the bottom while the reader is there; scrolling
    // up stops that, and returning to the bottom resumes it.
    void followsStreamingOutputUntilTheReaderScrollsUp() {
        ChatView view;
        view.resize(500, 300);
        view.show();
        QVERIFY(QTest::qWaitForWindowExposed(&view));
        // A restored conversation first (as when the user opens an old one), then a new turn.
        QVector<ChatMessage> history;
        for (int i = 0; i < 40; ++i) {
            ChatMessage m;
            m.role = i % 2 ? MessageRole::Assistant : MessageRole::User;
            for (int w = 0; w < 30; ++w) m.text += sampleWord(i + w);
            history.push_back(m);
        }
        view.setMessages(history);
        view.addMessage(MessageRole::User, QStringLiteral("Tell me a long story."));
        view.beginAssistantMessage();
        QScrollBar* bar = view.transcript()->verticalScrollBar();
        auto stream = [&](int first, int count) {
            for (int i = first; i < first + count; ++i)
                view.appendToken(makeToken(
                    sampleWord(i) + (i % 7 == 6 ? QStringLiteral("\n") : QString()), 0.5f, i));
            QTRY_COMPARE(view.pendingTokenCount(), 0);
            QTest::qWait(30);  // layout and scroll range settle
        };
        stream(0, 300);
        QVERIFY(bar->maximum() > 0);
        QCOMPARE(bar->value(), bar->maximum());
        stream(300, 100);
        QCOMPARE(bar->value(), bar->maximum());

        // The reader scrolls up to re-read the beginning: the view stays there.
        bar->triggerAction(QAbstractSlider::SliderToMinimum);
        QCOMPARE(bar->value(), 0);
        QVERIFY(!view.isFollowing());
        stream(400, 150);
        QCOMPARE(bar->value(), 0);

        // Back at the bottom: following resumes.
        bar->triggerAction(QAbstractSlider::SliderToMaximum);
        QVERIFY(view.isFollowing());
        const int max_before = bar->maximum();
        stream(550, 150);
        QVERIFY(bar->maximum() > max_before);
        QCOMPARE(bar->value(), bar->maximum());
    }

    void editBannerSaysLaterMessagesAreDiscarded() {
        ChatView view;
        view.show();
        QVERIFY(QTest::qWaitForWindowExposed(&view));
        view.addMessage(MessageRole::User, QStringLiteral("One"));
        view.addMessage(MessageRole::Assistant, QStringLiteral("Reply one"));
        view.addMessage(MessageRole::User, QStringLiteral("Two"));
        view.addMessage(MessageRole::Assistant, QStringLiteral("Reply two"));
        view.beginEdit(0);
        QVERIFY2(
            view.editBannerText().contains(QStringLiteral("3 messages after it will be discarded")),
            qPrintable(view.editBannerText()));
        view.cancelEdit();
        view.beginEdit(2);
        QVERIFY2(view.editBannerText().contains(
                     QStringLiteral("the message after it will be discarded")),
                 qPrintable(view.editBannerText()));
    }

    // The footer line under a reply is outside its body: token hit-testing and ranges do not
    // change, and it survives a rebuild (setMessages, palette change).
    void replyNoteSitsOutsideTheTokens() {
        ChatView view;
        view.show();
        QVERIFY(QTest::qWaitForWindowExposed(&view));
        view.addMessage(MessageRole::User, QStringLiteral("Hi"));
        view.beginAssistantMessage();
        for (int i = 0; i < 3; ++i) view.appendToken(makeToken(sampleWord(i), 0.5f, i));
        view.finishAssistantMessage();
        MessageDocument* doc = view.messageDocument();
        const auto body = doc->messageBodyRange(1);
        const QString note = QStringLiteral("■ Stopped by you · 3 tokens · 41.0 tok/s");
        view.setMessageNote(1, note);
        const QString text = doc->document()->toPlainText();
        // The note, then the reply's two copy links.
        const QString line = note + QStringLiteral(" \u00B7 Copy \u00B7 Copy as text");
        QVERIFY2(text.endsWith(line), qPrintable(text));
        QCOMPARE(doc->messageBodyRange(1), body);
        const int note_pos = int(text.lastIndexOf(note)) + 2;
        QVERIFY(!doc->tokenAtPosition(note_pos).valid());
        QCOMPARE(doc->tokenAtPosition(body.first).token, 0);
        // Kept through a rebuild, and a new message goes after it.
        view.setMessages({view.message(0), view.message(1)});
        QVERIFY(doc->document()->toPlainText().endsWith(line));
        view.addMessage(MessageRole::User, QStringLiteral("Next"));
        QVERIFY(doc->document()->toPlainText().endsWith(QStringLiteral("Next")));
        QVERIFY(doc->document()->toPlainText().contains(note));
    }

    void screenshots() {
        for (const bool dark : {false, true}) {
            ChatView view;
            if (dark) view.setPalette(tokenscope::ui::test::dark_palette());
            view.resize(760, 620);
            view.show();
            QVERIFY(QTest::qWaitForWindowExposed(&view));
            view.addMessage(MessageRole::System,
                            QStringLiteral("You are a concise assistant for programmers."));
            view.addMessage(MessageRole::User, QStringLiteral("How do I print a vector in C++?"));
            view.beginAssistantMessage();
            const char* pieces[] = {
                "Use",   " a",       " range",     "-based", " for", " loop",  ":",    "\n",
                "```",   "cpp",      "\n",         "for",    " (",   "int",    " x",   " :",
                " v",    ")",        " std",       "::",     "cout", " <<",    " x",   " <<",
                " '",    " '",       ";",          "\n",     "```",  "\n",     "This", " prints",
                " each", " element", " separated", " by",    " a",   " space", "."};
            int i = 0;
            for (const char* piece : pieces) {
                const float p = float(0.97 - 0.9 * std::fabs(std::sin(i * 1.7)));
                view.appendToken(makeToken(QString::fromUtf8(piece), p, 500 + i));
                ++i;
            }
            view.finishAssistantMessage();
            view.setColorByProbability(true);
            view.setShowTokenBoundaries(true);
            view.input()->setPlainText(QStringLiteral("And with fmt?"));
            QApplication::processEvents();
            const QString name =
                dark ? QStringLiteral("chat_view_dark.png") : QStringLiteral("chat_view.png");
            QVERIFY(view.grab().save(kShotDir + u'/' + name));
        }
    }
};

QTEST_MAIN(TestChatView)
#include "test_chat_view.moc"
