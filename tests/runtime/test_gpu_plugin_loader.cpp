// Where the engine looks for the CUDA plugin (runtime/gpu_plugin_loader.h): the override first,
// then beside the executable, then ../lib/tokenscope (the .deb layout), and nothing else.
#include <QtTest>

#include "runtime/gpu_plugin_loader.h"

using tokenscope::runtime::gpu_plugin_candidates;

class TestGpuPluginLoader : public QObject {
    Q_OBJECT
private slots:
    void searchOrder() {
        const auto c = gpu_plugin_candidates("/opt/ts/bin/tokenscope-cli", nullptr);
        QCOMPARE(c.size(), std::size_t{2});
        QCOMPARE(QString::fromStdString(c[0]), QString("/opt/ts/bin/libtokenscope_cuda.so"));
        QCOMPARE(QString::fromStdString(c[1]), QString("/opt/ts/lib/tokenscope/libtokenscope_cuda.so"));
    }
    void overrideComesFirst() {
        const auto c = gpu_plugin_candidates("/usr/bin/tokenscope", "/tmp/custom.so");
        QCOMPARE(c.size(), std::size_t{3});
        QCOMPARE(QString::fromStdString(c[0]), QString("/tmp/custom.so"));
        QCOMPARE(QString::fromStdString(c[2]), QString("/usr/lib/tokenscope/libtokenscope_cuda.so"));
    }
    void emptyOverrideAndUnknownExecutable() {
        QVERIFY(gpu_plugin_candidates("", "").empty());
        QCOMPARE(gpu_plugin_candidates("", "/x.so").size(), std::size_t{1});
    }
};

QTEST_GUILESS_MAIN(TestGpuPluginLoader)
#include "test_gpu_plugin_loader.moc"
