// The model info form shows the strings and numbers it is given.
#include <QApplication>
#include <QDir>
#include <QLabel>
#include <QTest>

#include "model_info_view.h"
#include "widget_test_support.h"

using namespace tokenscope::ui;
using tokenscope::ui::test::save_png;
using tokenscope::ui::test::kNb;
using tokenscope::ui::test::settle;

namespace {

ModelInfoData gemma_info() {
    ModelInfoData d;
    d.path = QStringLiteral("/home/user/models/gemma-3-270m-it-Q4_K_M.gguf");
    d.name = QStringLiteral("Gemma 3 270M Instruct");
    d.architecture = QStringLiteral("gemma3");
    d.parameters = 268'098'176;
    d.tensor_types = {QStringLiteral("Q4_K: 108 tensors, 120.4 MB"),
                      QStringLiteral("Q6_K: 19 tensors, 98.1 MB"),
                      QStringLiteral("F32: 109 tensors, 0.3 MB")};
    d.context_length = 32768;
    d.layers = 18;
    d.heads = 4;
    d.kv_heads = 1;
    d.embedding_length = 640;
    d.vocab_size = 262144;
    d.tokenizer = QStringLiteral("sentencepiece BPE, 262144 tokens");
    d.chat_template = QStringLiteral("gemma");
    d.backend = QStringLiteral("CPU (AVX2, 8 threads)");
    d.weight_bytes = 253'000'000;
    return d;
}

}  // namespace

class TestModelInfoView : public QObject {
    Q_OBJECT
  private slots:
    void showsGivenStrings();
    void emptyShowsDashes();
    void savePanelPngs();
};

void TestModelInfoView::showsGivenStrings() {
    ModelInfoView view;
    const ModelInfoData d = gemma_info();
    view.setData(d);
    QCOMPARE(view.fieldText(QStringLiteral("name")), d.name);
    QCOMPARE(view.fieldText(QStringLiteral("path")), d.path);
    QCOMPARE(view.fieldText(QStringLiteral("architecture")), d.architecture);
    QCOMPARE(view.fieldText(QStringLiteral("tokenizer")), d.tokenizer);
    QCOMPARE(view.fieldText(QStringLiteral("chat_template")), d.chat_template);
    QCOMPARE(view.fieldText(QStringLiteral("backend")), d.backend);
    QCOMPARE(view.fieldText(QStringLiteral("tensor_types")), d.tensor_types.join('\n'));
    QCOMPARE(
        view.fieldText(QStringLiteral("parameters")),
        QStringLiteral("268 M (268") + kNb + QStringLiteral("098") + kNb + QStringLiteral("176)"));
    QCOMPARE(view.fieldText(QStringLiteral("context_length")),
             QStringLiteral("32") + kNb + QStringLiteral("768 tokens"));
    QCOMPARE(view.fieldText(QStringLiteral("layers")), QStringLiteral("18"));
    QVERIFY(
        view.fieldText(QStringLiteral("heads")).startsWith(QStringLiteral("4 query, 1 key/value")));
    QCOMPARE(view.fieldText(QStringLiteral("embedding_length")), QStringLiteral("640"));
    QCOMPARE(view.fieldText(QStringLiteral("memory")), QStringLiteral("253") + kNb + "MB");
    // The strings are really on screen, as labels.
    bool found = false;
    for (const QLabel* label : view.findChildren<QLabel*>()) {
        if (label->text() == d.architecture) found = true;
    }
    QVERIFY(found);
}

void TestModelInfoView::emptyShowsDashes() {
    ModelInfoView view;
    view.setData(ModelInfoData{});
    for (const QString& key : view.fieldKeys()) QCOMPARE(view.fieldText(key), QStringLiteral("—"));
}

void TestModelInfoView::savePanelPngs() {
    ModelInfoView view;
    view.resize(460, 440);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    view.setData(gemma_info());
    settle();
    QDir().mkpath(QStringLiteral("/tmp/tokenscope-panels"));
    view.grab().save(QStringLiteral("/tmp/tokenscope-panels/model_info_light.png"));
}

QTEST_MAIN(TestModelInfoView)
#include "test_model_info_view.moc"
