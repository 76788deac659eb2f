// `tokenscope-cli run --remote` (and `chat --remote`) against our server in-process on a tiny
// model: the streamed text equals the server's greedy answer, --json carries per-token
// logprobs, and a bad or unreachable URL is one line on stderr with exit status 1.
#include <QProcess>
#include <QtTest>

#include <nlohmann/json.hpp>

#include "api_server.h"
#include "server/tiny_server.h"
#include "remote_engine.h"
#include "util/cli_process.h"

using namespace tokenscope;
using nlohmann::json;

namespace {

test::CliResult cli(const QStringList& args, const QByteArray& input = {}) {
    return test::run_process(TOKENSCOPE_CLI, args, input, 60000);
}

}  // namespace

class TestCliRemote : public QObject {
    Q_OBJECT

    std::unique_ptr<server::ApiServer> server_;
    QString url_;

  private slots:
    void initTestCase() {
        server_ = test::start_tiny_server();
        url_ = QString("http://127.0.0.1:%1/v1").arg(server_->port());
    }
    void cleanupTestCase() { server_.reset(); }

    void runRemoteJson() {
        // The reference: the same request through the library.
        remote::RemoteOptions ro;
        ro.url = url_.toStdString();
        remote::RemoteEngine engine(ro);
        remote::ChatRequest request;
        request.messages = {{"user", "Tell me about the garden"}};
        request.max_tokens = 12;
        request.temperature = 0.0;
        const auto expected = engine.chat(request, [](const remote::RemoteToken&) {});

        const test::CliResult r = cli({"run", "--remote", url_, "--prompt", "Tell me about the garden",
                           "--n-predict", "12", "--temp", "0", "--json"});
        QVERIFY2(r.exit_code == 0, qPrintable(r.err));
        const json j = json::parse(r.out.toStdString());
        QCOMPARE(j["model"], json("tiny"));
        QCOMPARE(j["text"].get<std::string>(), expected.text);
        QVERIFY(j["logprobs"].get<bool>());
        QVERIFY(!j["tokens"].empty());
        std::string joined;
        for (const auto& t : j["tokens"]) {
            QVERIFY(t["logprob"].get<double>() <= 0.0);
            QVERIFY(!t["top_logprobs"].empty());
            QVERIFY(t.contains("id"));  // our server's extension
            joined += t["text"].get<std::string>();
        }
        QCOMPARE(joined, expected.text);
        QVERIFY(j["timings"]["ttft_ms"].get<double>() > 0.0);

        // Streamed to the terminal: the same text on stdout, the summary on stderr.
        const test::CliResult plain = cli({"run", "--remote", url_, "--prompt", "Tell me about the garden",
                               "--n-predict", "12", "--temp", "0"});
        QCOMPARE(plain.exit_code, 0);
        QCOMPARE(plain.out.toStdString(), expected.text);
        QVERIFY2(plain.err.contains("tiny on http://127.0.0.1"), qPrintable(plain.err));
    }

    void chatRemote() {
        const test::CliResult r =
            cli({"chat", "--remote", url_, "--n-predict", "4", "--temp", "0"}, "hello\n/quit\n");
        QVERIFY2(r.exit_code == 0, qPrintable(r.err));
        QVERIFY(!r.out.isEmpty());
        QVERIFY(r.err.contains("tok/s"));
    }

    void badUrlsAreOneLine() {
        for (const QStringList& args :
             {QStringList{"run", "--remote", "http://127.0.0.1:1/v1", "--prompt", "x"},
              QStringList{"run", "--remote", "ftp://nowhere", "--prompt", "x"},
              QStringList{"run", "--remote", url_, "--remote-model", "nope", "--prompt", "x"},
              QStringList{"chat", "--remote", "http://127.0.0.1:1"}}) {
            const test::CliResult r = cli(args);
            QVERIFY2(r.exit_code == 1, qPrintable(args.join(' ')));
            QVERIFY(r.out.isEmpty());
            QCOMPARE(r.err.count('\n'), 1);
            QVERIFY2(r.err.startsWith("tokenscope-cli: error: "), qPrintable(r.err));
        }
    }
};

QTEST_GUILESS_MAIN(TestCliRemote)
#include "test_cli_remote.moc"
