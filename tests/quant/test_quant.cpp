// Unit tests of the quantization lab's engine parts: the importance-weighted quantizers
// (tensor::quantize_row_weighted), the imatrix file (GGUF and llama.cpp's legacy .dat), the
// imatrix/model fit check, the per-tensor type plan of the recipes, and the streamed GGUF write
// that leaves nothing under the output name when it fails. The CLI end to end, against the
// `gguf` Python package, is tests/quant/check_quantization_with_gguf_py.py.
#include <QObject>
#include <QtTest>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "gguf/file.h"
#include "gguf/writer.h"
#include "quant/imatrix.h"
#include "quant/quant_eval.h"
#include "quant/quantize_model.h"
#include "tensor/type.h"
#include "util/error.h"
#include "util/test_paths.h"

using namespace tokenscope;
using tensor::Type;

namespace {

const Type kWeightedTypes[] = {Type::Q4_0, Type::Q4_1, Type::Q5_0, Type::Q5_1, Type::Q2_K,
                               Type::Q3_K, Type::Q4_K, Type::Q5_K, Type::Q6_K};

std::vector<float> random_row(std::int64_t n, std::uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> v(static_cast<std::size_t>(n));
    for (float& x : v) x = normal(rng);
    return v;
}

std::vector<float> round_trip(Type type, const std::vector<float>& x, const float* importance) {
    const auto n = static_cast<std::int64_t>(x.size());
    std::vector<std::uint8_t> q(tensor::row_bytes(type, n));
    tensor::quantize_row_weighted(type, x.data(), q.data(), n, importance);
    std::vector<float> y(x.size());
    tensor::dequantize_row(type, q.data(), y.data(), n);
    return y;
}

// Sum over rows of the squared error on elements [begin, end) of each block of `period`.
double error_on(const std::vector<float>& x, const std::vector<float>& y, int period, int begin,
                int end) {
    double e = 0;
    for (std::size_t j = 0; j < x.size(); ++j) {
        const int k = static_cast<int>(j % static_cast<std::size_t>(period));
        if (k >= begin && k < end)
            e += (static_cast<double>(x[j]) - y[j]) * (static_cast<double>(x[j]) - y[j]);
    }
    return e;
}

std::string scratch(const char* name) {
    return test::scratch_dir() + "/" + name;
}

}  // namespace

class TestQuant : public QObject {
    Q_OBJECT

  private slots:
    // A null importance gives exactly the plain quantizer's bytes.
    void nullImportanceIsPlainQuantizer() {
        for (const auto& t : tensor::all_types()) {
            if (!t.quantize_row) continue;
            const std::vector<float> x = random_row(512, 3);
            std::vector<std::uint8_t> a(tensor::row_bytes(t.type, 512)), b(a.size());
            tensor::quantize_row(t.type, x.data(), a.data(), 512);
            tensor::quantize_row_weighted(t.type, x.data(), b.data(), 512, nullptr);
            QVERIFY2(a == b, t.name);
        }
        QVERIFY(!tensor::uses_importance(Type::Q8_0));
        QVERIFY(!tensor::uses_importance(Type::F16));
        QVERIFY(tensor::uses_importance(Type::Q4_K));
    }

    // A few important elements per block: their error is lower with the importance than without,
    // summed over many rows, for every weighted format.
    void importanceLowersErrorWhereItMatters() {
        const std::int64_t n = 512;
        std::vector<float> importance(static_cast<std::size_t>(n), 1.0f);
        for (std::int64_t j = 0; j < n; j += 32) {
            for (int k = 0; k < 3; ++k) importance[static_cast<std::size_t>(j + k)] = 100.0f;
        }
        for (Type type : kWeightedTypes) {
            double plain = 0, weighted = 0, plain_all = 0, weighted_all = 0;
            for (std::uint32_t r = 0; r < 64; ++r) {
                const std::vector<float> x = random_row(n, 100 + r);
                const std::vector<float> yp = round_trip(type, x, nullptr);
                const std::vector<float> yw = round_trip(type, x, importance.data());
                plain += error_on(x, yp, 32, 0, 3);
                weighted += error_on(x, yw, 32, 0, 3);
                plain_all += error_on(x, yp, 1, 0, 1);
                weighted_all += error_on(x, yw, 1, 0, 1);
            }
            qInfo("%s: important elements %.4f -> %.4f, all %.4f -> %.4f", tensor::type_name(type),
                  plain, weighted, plain_all, weighted_all);
            QVERIFY2(weighted < plain, tensor::type_name(type));
        }
    }

    // Uniform importance: the weighted search is no worse than round-to-nearest for the 32-element
    // formats (it searches the scale where RTN takes the block's extreme), and within 5 % for the
    // K-quants (their weights sqrt(mean x^2 + x^2) favour large elements, so plain squared error
    // is not quite what they minimise).
    void uniformImportanceIsNoWorse() {
        const std::int64_t n = 512;
        const std::vector<float> ones(static_cast<std::size_t>(n), 1.0f);
        std::vector<std::pair<Type, double>> results;
        for (Type type : kWeightedTypes) {
            double plain = 0, weighted = 0;
            for (std::uint32_t r = 0; r < 32; ++r) {
                const std::vector<float> x = random_row(n, 500 + r);
                plain += error_on(x, round_trip(type, x, nullptr), 1, 0, 1);
                weighted += error_on(x, round_trip(type, x, ones.data()), 1, 0, 1);
            }
            qInfo("%s: uniform importance %.4f -> %.4f", tensor::type_name(type), plain, weighted);
            results.emplace_back(type, weighted / plain);
        }
        for (const auto& [type, ratio] : results) {
            const bool k_quant = tensor::traits(type).block_size == 256;
            QVERIFY2(ratio <= (k_quant ? 1.05 : 1.0), tensor::type_name(type));
        }
    }

    void imatrixGgufRoundTrip() {
        quant::Imatrix m;
        m.entries["blk.0.attn_q.weight"] = {{1.0f, 4.0f, 9.0f}, 2.0};
        m.entries["output.weight"] = {{2.0f, 2.0f, 2.0f}, 4.0};
        m.datasets = {"calibration.txt"};
        m.chunk_count = 3;
        m.chunk_size = 512;
        const std::string path = scratch("a.imatrix");
        quant::save_imatrix(m, path);
        const quant::Imatrix back = quant::load_imatrix(path);
        QCOMPARE(back.entries.size(), std::size_t{2});
        QCOMPARE(back.chunk_count, 3u);
        QCOMPARE(back.chunk_size, 512u);
        QCOMPARE(back.datasets, std::vector<std::string>{"calibration.txt"});
        QCOMPARE(back.mean("blk.0.attn_q.weight"), (std::vector<float>{0.5f, 2.0f, 4.5f}));
        QVERIFY(back.mean("nothing").empty());
        const gguf::File f = gguf::File::open(path);
        QCOMPARE(f.require_string("general.type"), std::string("imatrix"));
        QCOMPARE(f.find_tensor("output.weight.in_sum2")->dims, (std::vector<std::int64_t>{3, 1}));
        QCOMPARE(f.find_tensor("output.weight.counts")->dims, (std::vector<std::int64_t>{1, 1}));
    }

    // llama.cpp's legacy imatrix.dat: values are mean * ncall.
    void imatrixLegacyDat() {
        const std::string path = scratch("legacy.dat");
        {
            std::ofstream out(path, std::ios::binary);
            auto i32 = [&](std::int32_t v) { out.write(reinterpret_cast<const char*>(&v), 4); };
            i32(1);
            const std::string name = "blk.0.ffn_down.weight";
            i32(static_cast<std::int32_t>(name.size()));
            out.write(name.data(), static_cast<std::streamsize>(name.size()));
            i32(10);  // ncall
            i32(2);   // nval
            const float values[2] = {30.0f, 50.0f};
            out.write(reinterpret_cast<const char*>(values), sizeof values);
            i32(10);
            const std::string dataset = "wiki.train.raw";
            i32(static_cast<std::int32_t>(dataset.size()));
            out.write(dataset.data(), static_cast<std::streamsize>(dataset.size()));
        }
        const quant::Imatrix m = quant::load_imatrix(path);
        QCOMPARE(m.mean("blk.0.ffn_down.weight"), (std::vector<float>{3.0f, 5.0f}));
        QCOMPARE(m.chunk_count, 10u);
        QCOMPARE(m.datasets, std::vector<std::string>{"wiki.train.raw"});
        const std::string junk = scratch("junk.dat");
        std::ofstream(junk) << "not an imatrix";
        QVERIFY_THROWS_EXCEPTION(FormatError, quant::load_imatrix(junk));
    }

    void imatrixFromAnotherModelIsRejected() {
        gguf::Writer w;
        w.set("general.architecture", gguf::Value::string("llama"));
        const std::vector<float> zeros(64 * 4, 0.0f);
        w.add_tensor("blk.0.attn_q.weight", Type::F32, {64, 4},
                     {reinterpret_cast<const std::uint8_t*>(zeros.data()), zeros.size() * 4});
        const std::string model_path = scratch("m.gguf");
        w.write(model_path);
        const gguf::File model = gguf::File::open(model_path);
        quant::Imatrix fits;
        fits.entries["blk.0.attn_q.weight"] = {std::vector<float>(64, 1.0f), 1.0};
        quant::check_imatrix_fits(fits, "i", model);
        quant::Imatrix wrong_width;
        wrong_width.entries["blk.0.attn_q.weight"] = {std::vector<float>(32, 1.0f), 1.0};
        QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                                 quant::check_imatrix_fits(wrong_width, "i", model));
        quant::Imatrix wrong_name;
        wrong_name.entries["blk.7.attn_q.weight"] = {std::vector<float>(64, 1.0f), 1.0};
        try {
            quant::check_imatrix_fits(wrong_name, "other.imatrix", model);
            QFAIL("no exception");
        } catch (const InvalidArgument& e) {
            QVERIFY2(std::string(e.what()).find("blk.7.attn_q.weight") != std::string::npos,
                     e.what());
            QVERIFY2(std::string(e.what()).find("another model") != std::string::npos, e.what());
        }
    }

    void targetsParse() {
        QVERIFY(quant::parse_target("q4_k_m").has_value());
        QCOMPARE(quant::parse_target("Q4_K_M")->file_type, 15u);
        QCOMPARE(quant::parse_target("Q5_K_M")->base, Type::Q5_K);
        QVERIFY(!quant::parse_target("Q4_K_XL").has_value());
        QVERIFY(quant::target_names().find("BF16") != std::string::npos);
    }

    // A producer that fails midway: nothing under the output name, no temporary left, an
    // existing file untouched.
    void streamedWriteIsAtomic() {
        const std::string path = scratch("atomic.gguf");
        std::ofstream(path) << "old";
        gguf::Writer w;
        w.set("general.architecture", gguf::Value::string("llama"));
        w.add_tensor_info("a", Type::F32, {4});
        w.add_tensor_info("b", Type::F32, {4});
        QVERIFY_THROWS_EXCEPTION(
            IoError, w.write_streamed(path, [](std::size_t i, std::vector<std::uint8_t>& data) {
                if (i == 1) throw IoError("simulated failure");
                data.assign(16, 0);
            }));
        std::ifstream in(path);
        std::string text;
        in >> text;
        QCOMPARE(text, std::string("old"));
        QVERIFY(!std::filesystem::exists(path + ".partial"));
        w.write_streamed(path,
                         [](std::size_t, std::vector<std::uint8_t>& data) { data.assign(16, 7); });
        const gguf::File f = gguf::File::open(path);
        QCOMPARE(f.tensors().size(), std::size_t{2});
        QCOMPARE(f.find_tensor("b")->data[3], std::uint8_t{7});
    }

    void klDivergence() {
        const std::vector<float> logits = {1.0f, 2.0f, 3.0f};
        QCOMPARE(quant::kl_divergence(logits, logits), 0.0);
        const std::vector<float> shifted = {11.0f, 12.0f, 13.0f};  // same distribution
        QVERIFY(quant::kl_divergence(logits, shifted) < 1e-12);
        // KL(P || Q) for P = softmax(1,2,3), Q uniform: sum p log(3p).
        std::vector<float> lp(3);
        quant::log_softmax(logits, lp);
        double expected = 0;
        for (float v : lp)
            expected += std::exp(static_cast<double>(v)) * (static_cast<double>(v) + std::log(3.0));
        QVERIFY(std::fabs(quant::kl_divergence(logits, std::vector<float>{0.0f, 0.0f, 0.0f}) -
                          expected) < 1e-6);
    }
};

QTEST_GUILESS_MAIN(TestQuant)
#include "test_quant.moc"
