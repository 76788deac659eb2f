// inspect::read_model_card / scan_model_folder: the facts a model picker shows, read from GGUF
// files written here with known metadata (the expected values are what the files were given),
// plus the real default models when they are installed.
#include <QtTest>
#include <filesystem>
#include <fstream>

#include "gguf/writer.h"
#include "inspect/model_card.h"
#include "util/paths.h"
#include "util/test_paths.h"

using namespace tokenscope;

namespace {

// A tiny GGUF: one F32 tensor of `elements` values and the given metadata.
void write_model(const std::filesystem::path& path,
                 const std::vector<std::pair<std::string, gguf::Value>>& metadata,
                 std::int64_t elements) {
    gguf::Writer w;
    for (const auto& [key, value] : metadata) w.set(key, value);
    std::vector<std::uint8_t> data(static_cast<std::size_t>(elements) * 4, 0);
    w.add_tensor("token_embd.weight", tensor::Type::F32, {elements}, data);
    w.write(path.string());
}

}  // namespace

class TestModelCard : public QObject {
    Q_OBJECT

  private slots:
    void namesFromFileTypeAndWords() {
        QCOMPARE(QString::fromStdString(inspect::quantization_name(15)), QStringLiteral("Q4_K_M"));
        QCOMPARE(QString::fromStdString(inspect::quantization_name(3)), QStringLiteral("Q4_1"));
        QCOMPARE(QString::fromStdString(inspect::quantization_name(1)), QStringLiteral("F16"));
        QCOMPARE(QString::fromStdString(inspect::quantization_name(4)), QString());  // retired
        QCOMPARE(QString::fromStdString(inspect::format_file_size(98362432)),
                 QStringLiteral("98.4 MB"));
        QCOMPARE(QString::fromStdString(inspect::format_file_size(999)), QStringLiteral("999 B"));
    }

    void folderScan() {
        const std::filesystem::path dir = std::filesystem::path(test::scratch_dir()) / "models";
        std::filesystem::create_directories(dir);
        write_model(dir / "b-chat.gguf",
                    {{"general.architecture", gguf::Value::string("llama")},
                     {"general.name", gguf::Value::string("Tiny Llama")},
                     {"general.finetune", gguf::Value::string("Instruct")},
                     {"general.file_type", gguf::Value::u32(3)},
                     {"tokenizer.ggml.model", gguf::Value::string("gpt2")},
                     {"tokenizer.chat_template", gguf::Value::string("{{ messages }}")}},
                    1000);
        write_model(dir / "a-base.gguf", {{"general.architecture", gguf::Value::string("gemma3")}},
                    640);
        write_model(dir / "gemma-3-1b-it-q8.gguf",
                    {{"general.architecture", gguf::Value::string("gemma3")}}, 10);
        { std::ofstream(dir / "broken.gguf") << "not a model"; }
        { std::ofstream(dir / "notes.txt") << "ignored"; }

        const auto cards = inspect::scan_model_folder(dir);
        QCOMPARE(cards.size(), std::size_t(4));
        // Sorted by name: "a-base", "broken", "gemma-3-1b-it-q8", "Tiny Llama".
        QCOMPARE(QString::fromStdString(cards[0].name), QStringLiteral("a-base"));
        QCOMPARE(QString::fromStdString(cards[0].architecture), QStringLiteral("gemma3"));
        QCOMPARE(cards[0].parameters, std::int64_t(640));
        QCOMPARE(QString::fromStdString(cards[0].quantization),
                 QStringLiteral("F32"));  // from the tensors
        QVERIFY(!cards[0].instruct);
        QVERIFY(!cards[0].has_chat_template);

        QCOMPARE(QString::fromStdString(cards[1].name), QStringLiteral("broken"));
        QVERIFY2(QString::fromStdString(cards[1].error).contains("broken.gguf"),
                 cards[1].error.c_str());

        QVERIFY(cards[2].instruct);  // "-it-" in the file name
        QCOMPARE(QString::fromStdString(cards[3].name), QStringLiteral("Tiny Llama"));
        QCOMPARE(QString::fromStdString(cards[3].quantization), QStringLiteral("Q4_1"));
        QCOMPARE(QString::fromStdString(cards[3].tokenizer), QStringLiteral("gpt2"));
        QVERIFY(cards[3].instruct);
        QVERIFY(cards[3].has_chat_template);
        QCOMPARE(cards[3].file_bytes,
                 std::uint64_t(std::filesystem::file_size(dir / "b-chat.gguf")));

        QVERIFY(inspect::scan_model_folder(dir / "missing").empty());
    }

    // The installed models, when present: Gemma 3 270M base and SmolLM2-135M-Instruct.
    void realModels() {
        const auto gemma = paths::models_dir() / "gemma-3-270m-q4_k_m.gguf";
        const auto smol = paths::models_dir() / "SmolLM2-135M-Instruct.Q4_1.gguf";
        if (!std::filesystem::exists(gemma) && !std::filesystem::exists(smol))
            QSKIP("neither default model is installed (tools/setup-deps installs them)");
        if (std::filesystem::exists(gemma)) {
            const auto card = inspect::read_model_card(gemma);
            QCOMPARE(QString::fromStdString(card.architecture), QStringLiteral("gemma3"));
            QCOMPARE(QString::fromStdString(card.quantization), QStringLiteral("Q4_K_M"));
            QVERIFY(!card.instruct);
        }
        if (std::filesystem::exists(smol)) {
            const auto card = inspect::read_model_card(smol);
            QCOMPARE(QString::fromStdString(card.architecture), QStringLiteral("llama"));
            QCOMPARE(QString::fromStdString(card.quantization), QStringLiteral("Q4_1"));
            QCOMPARE(QString::fromStdString(card.tokenizer), QStringLiteral("gpt2"));
            QVERIFY(card.instruct);
            // 135M parameters by the model's own name; the tensors hold 134.5M.
            QVERIFY2(card.parameters > 130'000'000 && card.parameters < 140'000'000,
                     std::to_string(card.parameters).c_str());
        }
    }
};

QTEST_MAIN(TestModelCard)
#include "test_model_card.moc"
