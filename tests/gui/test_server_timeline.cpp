// Tools › Server timeline (issue 18: the batch timeline for the server's requests): the model
// that accumulates GET /tokenscope/v1/schedule answers, and the window polling the app's own
// in-process server (ModelServer) while two clients' requests run together. The expected cell
// counts come from the replies' usage (prompt_tokens, completion_tokens), computed by the
// server's response formatter, not by the schedule.
#include <httplib.h>

#include <QLabel>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QtTest>
#include <nlohmann/json.hpp>
#include <thread>

#include "batch_timeline_view.h"
#include "model_server.h"
#include "reference/tiny_model.h"
#include "server_timeline_model.h"
#include "server_timeline_window.h"
#include "util/test_paths.h"

using namespace tokenscope;
using app::ServerTimelineModel;
using json = nlohmann::json;
using Cell = ui::BatchTimelineCell;

namespace {
json entry(const std::string& id, const std::string& kind, int tokens) {
    return {{"request", id}, {"kind", kind}, {"tokens", tokens}};
}
}  // namespace

class TestServerTimeline : public QObject {
    Q_OBJECT
    QString model_;

  private slots:
    void initTestCase() {
        QStandardPaths::setTestModeEnabled(true);
        model_ =
            QString::fromStdString(test::tiny_model_path("timeline_llama", test::TinyModelSpec{}));
    }

    // Two pages: rows in order of first appearance, cells where the entries say, steps seen
    // twice kept once, a gap counted, a malformed page refused without changing anything.
    void modelAccumulatesPages() {
        ServerTimelineModel m;
        const json first = {
            {"budget", 32},
            {"next", 3},
            {"steps",
             {{{"step", 1},
               {"budget", 32},
               {"entries",
                {entry("chatcmpl-aaaaaa", "prefill", 20), entry("chatcmpl-bbbbbb", "waiting", 0)}}},
              {{"step", 2},
               {"budget", 32},
               {"entries",
                {entry("chatcmpl-aaaaaa", "decode", 1),
                 entry("chatcmpl-bbbbbb", "prefill", 12)}}}}}};
        QVERIFY(m.add(first));
        QCOMPARE(m.next(), std::uint64_t{3});
        ui::BatchTimelineData d = m.data();
        QCOMPARE(d.rows, QStringList({"#1 …aaaaaa", "#2 …bbbbbb"}));
        QCOMPARE(d.steps.size(), 2);
        QCOMPARE(d.steps[0][0].kind, int(Cell::Prefill));
        QCOMPARE(d.steps[0][0].tokens, 20);
        QCOMPARE(d.steps[0][1].kind, int(Cell::Waiting));
        QCOMPARE(d.steps[1][1].tokens, 12);
        QCOMPARE(d.budget, 32);
        QCOMPARE(d.scheduledTokens(1), 13);

        // Step 2 again (seen), then 5: steps 3 and 4 were never seen.
        const json second = {
            {"budget", 32},
            {"next", 6},
            {"steps",
             {{{"step", 2}, {"entries", {entry("chatcmpl-aaaaaa", "decode", 1)}}},
              {{"step", 5}, {"entries", {entry("chatcmpl-cccccc", "prefill", 7)}}}}}};
        QVERIFY(m.add(second));
        QCOMPARE(m.stepCount(), std::size_t{3});
        QCOMPARE(m.skippedSteps(), std::uint64_t{2});
        d = m.data();
        QCOMPARE(d.rows.size(), 3);
        QCOMPARE(d.steps[2][2].kind, int(Cell::Prefill));
        QCOMPARE(d.steps[2][0].kind, int(Cell::Absent));
        QVERIFY(m.summary().contains("3 steps"));
        QVERIFY(m.summary().contains("2 steps came and went"));

        QString error;
        QVERIFY(!m.add(
            json{{"steps", {{{"step", 9}, {"entries", {{{"kind", "decode"}}}}}}}, {"next", 10}},
            &error));
        QVERIFY2(error.contains("request"), qPrintable(error));
        QCOMPARE(m.next(), std::uint64_t{6});
        QVERIFY(!m.add(json::array(), &error));
        QCOMPARE(ServerTimelineModel::kindOf("preempted"), int(Cell::Preempted));
        QCOMPARE(ServerTimelineModel::kindOf("unheard-of"), int(Cell::Absent));
    }

    // The window without a server says how to get one.
    void withoutAServerItExplains() {
        app::ServerTimelineWindow w;
        w.watch({}, {}, {});
        const QString text = w.findChild<QLabel*>("timelineSource")->text();
        QVERIFY2(text.contains("Serve this model"), qPrintable(text));
        QVERIFY(w.model().stepCount() == 0);
    }

    // The app's own server, two clients at once: the window shows both requests, each with as
    // many prefill tokens as its prompt and a decode cell for every completion token after the
    // first.
    void watchesTheAppsOwnServer() {
        app::ModelServer server;
        QSignalSpy started(&server, &app::ModelServer::started);
        QSignalSpy failed(&server, &app::ModelServer::failed);
        app::ServeSettings settings;
        settings.port = 0;
        settings.parallel = 2;
        app::LoadOptions load;
        load.threads = 1;
        load.kv_capacity_tokens = 256;
        server.start(model_, load, settings);
        QTRY_VERIFY_WITH_TIMEOUT(started.count() + failed.count() > 0, 30000);
        QCOMPARE(failed.count(), 0);
        QCOMPARE(server.url(), started[0][0].toString());
        const int port = server.url().section(':', -1).toInt();

        app::ServerTimelineWindow w;
        w.show();
        w.watch(server.url(), server.apiKey(), "test server");
        QSignalSpy updated(&w, &app::ServerTimelineWindow::updated);
        QTRY_VERIFY_WITH_TIMEOUT(updated.count() > 0, 10000);  // connected, no steps yet
        QVERIFY2(w.statusText().contains("No engine steps"), qPrintable(w.statusText()));

        std::vector<json> replies(2);
        std::vector<std::thread> clients;
        const std::vector<std::string> prompts = {"The little robot", "Once upon a time"};
        for (int i = 0; i < 2; ++i) {
            clients.emplace_back([&, i] {
                httplib::Client c("127.0.0.1", port);
                c.set_read_timeout(30);
                const json body = {{"model", "timeline_llama"},
                                   {"prompt", prompts[std::size_t(i)]},
                                   {"max_tokens", 6},
                                   {"temperature", 0}};
                if (auto r = c.Post("/v1/completions", body.dump(), "application/json"))
                    replies[std::size_t(i)] = json::parse(r->body, nullptr, false);
            });
        }
        for (auto& t : clients) t.join();
        for (const auto& r : replies) QVERIFY2(r.contains("usage"), r.dump().c_str());

        // Every step of both requests has reached the window.
        const auto cells_of = [&](const json& reply, int kind) {
            const QString tail = QString::fromStdString(reply["id"].get<std::string>()).right(6);
            const ui::BatchTimelineData d = w.timeline()->data();
            int row = -1;
            for (int r = 0; r < d.rows.size(); ++r)
                if (d.rows[r].endsWith(tail)) row = r;
            int count = 0, tokens = 0;
            for (const auto& step : d.steps)
                if (row >= 0 && step[row].kind == kind) {
                    ++count;
                    tokens += step[row].tokens;
                }
            return std::pair{count, tokens};
        };
        for (const auto& r : replies) {
            const int decodes = r["usage"]["completion_tokens"].get<int>() - 1;
            QTRY_COMPARE_WITH_TIMEOUT(cells_of(r, Cell::Decode).first, decodes, 10000);
            QCOMPARE(cells_of(r, Cell::Prefill).second, r["usage"]["prompt_tokens"].get<int>());
        }
        QCOMPARE(w.timeline()->data().rows.size(), 2);
        QVERIFY(!w.timeline()->render().isNull());
        QVERIFY2(w.statusText().contains("2 requests"), qPrintable(w.statusText()));

        // Paused: no more polls; the steps shown stay as they are.
        w.setPaused(true);
        QTest::qWait(50);
        const auto steps = w.model().stepCount();
        httplib::Client c("127.0.0.1", port);
        c.set_read_timeout(30);
        QVERIFY(
            c.Post("/v1/completions",
                   json{{"model", "timeline_llama"}, {"prompt", "More"}, {"max_tokens", 3}}.dump(),
                   "application/json"));
        QTest::qWait(1200);  // two poll periods
        QCOMPARE(w.model().stepCount(), steps);
        w.setPaused(false);
        QTRY_VERIFY_WITH_TIMEOUT(w.model().stepCount() > steps, 10000);
        server.stop();
    }
};

QTEST_MAIN(TestServerTimeline)
#include "test_server_timeline.moc"
