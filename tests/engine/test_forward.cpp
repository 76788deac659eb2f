// The CPU forward pass against the float64 reference (tests/reference) on tiny models written
// at test time, and against itself: cached incremental decode vs full recompute, a ragged
// batch vs single runs, quantized weights and KV element types within stated tolerances.
#include <QtTest>

#include "engine_test_helpers.h"
#include "inspect/attention_capture.h"
#include "reference/reference_forward.h"
#include "reference/tiny_model.h"
#include "tensor/matmul.h"
#include "util/large_pages.h"

using namespace tokenscope;
using test::TinyModelSpec;

namespace {

std::vector<std::int32_t> sample_tokens(std::int64_t n, std::int64_t vocab, std::uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<std::int32_t> tokens(static_cast<std::size_t>(n));
    for (auto& t : tokens) t = static_cast<std::int32_t>(3 + rng() % static_cast<std::uint32_t>(vocab - 3));
    return tokens;
}

runtime::EngineOptions options(kv::ElementType kv_type = kv::ElementType::F32, int threads = 2) {
    runtime::EngineOptions o;
    o.threads = threads;
    o.kv_capacity_tokens = 512;
    o.kv_type = kv_type;
    return o;
}

TinyModelSpec gemma_spec() {
    TinyModelSpec s;
    s.architecture = "gemma3";
    s.layers = 6;  // five sliding-window layers and one global layer
    s.sliding_window = 4;
    s.rope_base = 1000000.0f;
    s.norm_eps = 1e-6f;
    return s;
}

// The tiny models of each architecture the float64 check runs on, by name.
TinyModelSpec spec_named(const QString& name) {
    TinyModelSpec s;
    if (name == "llama_window") s.sliding_window = 5;  // Mistral v0.1: a window on every layer
    if (name == "llama_tied") s.tied_output = true;
    if (name == "gemma3") s = gemma_spec();
    if (name == "qwen2") {
        s.architecture = "qwen2";
        s.rope_base = 1000000.0f;
        s.norm_eps = 1e-6f;
        s.tied_output = true;  // Qwen2.5 0.5B-3B tie the output to the embedding
    }
    if (name == "qwen2_untied") {
        s.architecture = "qwen2";
        s.norm_eps = 1e-6f;
    }
    if (name == "qwen3") {
        s.architecture = "qwen3";
        s.head_dim = 32;  // q is 4 x 32 = 128 wide on a 64-wide model, as Qwen3-0.6B (16 x 128 on 1024)
        s.rope_base = 1000000.0f;
        s.norm_eps = 1e-6f;
    }
    if (name == "phi3") {
        s.architecture = "phi3";
        s.heads = 4;
        s.kv_heads = 4;  // Phi-3-mini: no grouping
        s.sliding_window = 6;  // Phi-3-mini-4k: 2047, on every layer
    }
    if (name == "llama3_rope") {
        // Base 100 and an original context of 64 put the 8 pairs' wavelengths (6 to 350
        // positions) in all three bands of the llama3 scaling, and make the slowed-down
        // rotations visible within the test's 14 positions.
        s.rope_base = 100.0f;
        s.llama3_rope = {8.0, 1.0, 4.0, 64.0};
    }
    if (name == "smollm2") {
        // SmolLM2-135M's shape, scaled down: 9 heads over 3 KV heads, tied output, base 100 000.
        s.width = 72;
        s.heads = 9;
        s.kv_heads = 3;
        s.head_dim = 8;
        s.rope_base = 100000.0f;
        s.tied_output = true;
    }
    if (name == "mistral_nemo") {
        // Mistral Nemo: heads x head_dim (32 x 128) wider than the model (5120) and a large base.
        s.head_dim = 32;
        s.rope_base = 1000000.0f;
    }
    return s;
}

TinyModelSpec quantizable_spec(tensor::Type type) {
    // K-quant rows are 256 wide: every matrix here has 256 or 512 columns.
    TinyModelSpec s;
    s.width = 256;
    s.heads = 4;
    s.kv_heads = 2;
    s.head_dim = 64;
    s.ffn = 512;
    s.weight_type = type;
    return s;
}

// Worst relative error over positions between the engine's rows and the reference rows.
double worst_error(const std::vector<std::vector<float>>& engine, const std::vector<std::vector<double>>& reference) {
    double worst = 0.0;
    for (std::size_t p = 0; p < reference.size(); ++p) worst = std::max(worst, test::relative_error(engine[p], reference[p]));
    return worst;
}

double worst_error(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
    std::vector<std::vector<double>> bd;
    for (const auto& row : b) bd.emplace_back(row.begin(), row.end());
    return worst_error(a, bd);
}

}  // namespace

class TestForward : public QObject {
    Q_OBJECT

private slots:
    // F32 weights and an F32 cache: the engine differs from float64 only by float rounding
    // (~1e-7 per operation, a few hundred operations deep): 1e-4 is the bound.
    void matchesReference_data() {
        QTest::addColumn<QString>("name");
        QTest::addColumn<int>("chunk");
        QTest::newRow("llama, one chunk") << "llama" << 64;
        QTest::newRow("llama, chunks of 3") << "llama" << 3;
        QTest::newRow("llama, sliding window 5") << "llama_window" << 64;
        QTest::newRow("llama, tied output") << "llama_tied" << 64;
        QTest::newRow("gemma3, one chunk") << "gemma3" << 64;
        QTest::newRow("gemma3, token by token") << "gemma3" << 1;
        QTest::newRow("qwen2 (q/k/v biases), one chunk") << "qwen2" << 64;
        QTest::newRow("qwen2 (q/k/v biases), token by token") << "qwen2" << 1;
        QTest::newRow("qwen2, separate output") << "qwen2_untied" << 64;
        QTest::newRow("qwen3 (q/k norm), one chunk") << "qwen3" << 64;
        QTest::newRow("qwen3 (q/k norm), chunks of 3") << "qwen3" << 3;
        QTest::newRow("phi3 (fused qkv, gate+up; window 6), one chunk") << "phi3" << 64;
        QTest::newRow("phi3 (fused qkv, gate+up; window 6), chunks of 3") << "phi3" << 3;
        QTest::newRow("llama 3.x rope_freqs, one chunk") << "llama3_rope" << 64;
        QTest::newRow("llama 3.x rope_freqs, token by token") << "llama3_rope" << 1;
        QTest::newRow("smollm2 shape (llama, 9/3 heads, tied)") << "smollm2" << 64;
        QTest::newRow("mistral nemo shape (llama, wide heads)") << "mistral_nemo" << 64;
    }

    void matchesReference() {
        QFETCH(QString, name);
        QFETCH(int, chunk);
        const TinyModelSpec spec = spec_named(name);
        const std::string path = test::tiny_model_path(name.toStdString(), spec);
        auto engine = runtime::Engine::load(path, options());
        const auto tokens = sample_tokens(14, engine->config().vocab_size, 7);
        const auto ref = test::reference_forward(path, spec, tokens);
        const auto got = test::run_sequence(*engine, tokens, chunk);
        const double err = worst_error(got, ref.logits);
        qInfo("%s: worst relative logit error %.3g", qPrintable(name), err);
        QVERIFY2(err <= 1e-4, qPrintable(QString::number(err)));
    }

    // The rope_freqs factors reach the rotation: the same weights without the tensor give
    // different logits (so the check above is not passing on factors that change nothing).
    void ropeFreqsChangeTheResult() {
        const TinyModelSpec spec = spec_named("llama3_rope");
        TinyModelSpec plain = spec;
        plain.llama3_rope.factor = 0.0;
        auto scaled = runtime::Engine::load(test::tiny_model_path("llama3_rope", spec), options());
        auto unscaled = runtime::Engine::load(test::tiny_model_path("llama3_rope_plain", plain), options());
        const auto tokens = sample_tokens(14, scaled->config().vocab_size, 7);
        const double diff = worst_error(test::run_sequence(*scaled, tokens, 64), test::run_sequence(*unscaled, tokens, 64));
        qInfo("rope_freqs vs none: %.3g", diff);
        QVERIFY2(diff > 1e-2, qPrintable(QString::number(diff)));
    }

    // Cached decode must equal recomputing everything at once (same kernels, different
    // grouping of tokens): a bound of 1e-5 allows for the different summation order of the
    // batched matmul kernels.
    // The CPU backend reads its weights from a copy in large pages by default; the copy must
    // compute exactly what the file mapping does, and the option must choose between them.
    void largePageWeightsEqualTheMapping() {
        const std::string path = test::tiny_model_path("llama", TinyModelSpec{});
        runtime::EngineOptions mapped_options = options(kv::ElementType::F16);
        mapped_options.large_pages = false;
        auto mapped = runtime::Engine::load(path, mapped_options);
        auto copied = runtime::Engine::load(path, options(kv::ElementType::F16));
        QVERIFY(!mapped->file().in_large_pages());
        QCOMPARE(copied->file().in_large_pages(), large_pages_available());
        const auto tokens = sample_tokens(20, mapped->config().vocab_size, 5);
        const auto a = test::run_sequence(*mapped, tokens, 7);
        const auto b = test::run_sequence(*copied, tokens, 7);
        QCOMPARE(a.size(), b.size());
        QVERIFY(a == b);  // bit for bit: same bytes, same kernels
    }

    // Where the system offers no large pages (Windows, THP "never"; TOKENSCOPE_LARGE_PAGES=off
    // pretends so), a file whose matrices interleave is still copied, into ordinary pages, and
    // interleaved there: the same layouts and bits as in large pages. A file with nothing to
    // interleave keeps the mapping, and `large_pages = false` keeps it in every case.
    void interleavingWithoutLargePagesUsesOrdinaryPages() {
        // Q4_1: interleaved at the AVX2 and the AVX-512 level (tensor::interleaving_pays).
        if (!tensor::interleaving_pays(tensor::Type::Q4_1) || std::getenv("TOKENSCOPE_INT8_GEMM"))
            QSKIP("the engine interleaves weights only at the AVX2 and AVX-512 levels");
        TinyModelSpec spec = quantizable_spec(tensor::Type::Q4_1);
        const std::string path = test::tiny_model_path("quant_Q4_1_pages", spec);
        const std::string plain = test::tiny_model_path("llama", TinyModelSpec{});
        auto in_large = runtime::Engine::load(path, options());
        runtime::EngineOptions mapped_options = options();
        mapped_options.large_pages = false;
        auto mapped = runtime::Engine::load(path, mapped_options);
        qputenv("TOKENSCOPE_LARGE_PAGES", "off");
        auto ordinary = runtime::Engine::load(path, options());
        auto plain_engine = runtime::Engine::load(plain, options());
        qunsetenv("TOKENSCOPE_LARGE_PAGES");

        QVERIFY(ordinary->file().is_private_copy());
        QVERIFY(!ordinary->file().in_large_pages());
        QVERIFY(!mapped->file().is_private_copy());
        QVERIFY(!plain_engine->file().is_private_copy());
        QCOMPARE(mapped->interleaved().matrices, 0);
        QCOMPARE(plain_engine->interleaved().matrices, 0);
        QVERIFY(ordinary->interleaved().matrices > 0);
        QCOMPARE(ordinary->interleaved().matrices, in_large->interleaved().matrices);
        QCOMPARE(ordinary->weights().layers[0].w_down.layout, tensor::RowLayout::Interleaved);
        const auto tokens = sample_tokens(20, ordinary->config().vocab_size, 3);
        QVERIFY(test::run_sequence(*ordinary, tokens, 1) ==
                test::run_sequence(*in_large, tokens, 1));
        QVERIFY(test::run_sequence(*ordinary, tokens, 64) ==
                test::run_sequence(*mapped, tokens, 64));
    }

    // Q8_0, Q4_1, Q5_0 and K-quant matrices stored interleaved for the AVX2 kernels
    // (model/interleave_weights.h):
    //  * against the float64 reference with the bound of quantizedWeightsMatchReference (5e-2),
    //    decoding one token at a time and in one prefill chunk;
    //  * a prefill chunk of 20 tokens gives the bits of the file order, whose lane GEMM sums each
    //    row in the same order (test_matmul: interleavedEqualsTheLaneGemmOfRows);
    //  * decode gives the bits of prefill when every matrix is interleaved: the layout's kernels
    //    compute every token count alike. (In file order the decode kernels sum in another order,
    //    and a last-bit difference that flips one activation's int8 rounding in a later layer
    //    grows to a few 1e-3: the logged "file order decode vs prefill".)
    // The tied variant reads its embedding rows back out of the interleaved output matrix.
    // At the AVX-512 level Q8_0 does not interleave (tensor::interleaving_pays) and is skipped
    // there.
    void interleavedWeightsMatchReference() {
        if (!tensor::interleaving_pays(tensor::Type::Q4_1) || std::getenv("TOKENSCOPE_INT8_GEMM"))
            QSKIP("the engine interleaves weights only at the AVX2 and AVX-512 levels");
        for (const auto& [type, tied] :
             {std::pair{tensor::Type::Q8_0, false}, std::pair{tensor::Type::Q8_0, true},
              std::pair{tensor::Type::Q4_1, true}, std::pair{tensor::Type::Q5_0, false},
              std::pair{tensor::Type::Q4_K, true}, std::pair{tensor::Type::Q5_K, false},
              std::pair{tensor::Type::Q6_K, false}, std::pair{tensor::Type::Q3_K, true},
              std::pair{tensor::Type::Q2_K, false}}) {
            if (!tensor::interleaving_pays(type)) continue;
            TinyModelSpec spec = quantizable_spec(type);
            spec.tied_output = tied;
            const std::string path = test::tiny_model_path(
                std::string("quant_") + tensor::type_name(type) + (tied ? "_tied" : ""), spec);
            runtime::EngineOptions rows_options = options();
            rows_options.interleave_weights = false;
            auto rows = runtime::Engine::load(path, rows_options);
            auto groups = runtime::Engine::load(path, options());
            const model::ModelWeights& w = groups->weights();
            QCOMPARE(rows->weights().layers[0].wq.layout, tensor::RowLayout::Rows);
            for (const auto& l : w.layers) {
                for (const auto* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) {
                    QCOMPARE(m->layout, tensor::RowLayout::Interleaved);
                }
            }
            const bool output_interleaved = w.output.layout == tensor::RowLayout::Interleaved;
            QCOMPARE(output_interleaved, w.output.rows % 16 == 0);
            // An untied embedding is only gathered: it keeps the file's order.
            QCOMPARE(w.token_embedding.layout,
                     tied ? w.output.layout : tensor::RowLayout::Rows);
            const auto tokens = sample_tokens(20, rows->config().vocab_size, 9);
            const auto ref = test::reference_forward(path, spec, tokens);
            const auto prefill = test::run_sequence(*groups, tokens, 64);
            const auto decode = test::run_sequence(*groups, tokens, 1);
            const double e_prefill = worst_error(prefill, ref.logits);
            const double e_decode = worst_error(decode, ref.logits);
            const double rows_spread =
                worst_error(test::run_sequence(*rows, tokens, 1),
                            [&] {
                                std::vector<std::vector<double>> d;
                                for (const auto& r : test::run_sequence(*rows, tokens, 64))
                                    d.emplace_back(r.begin(), r.end());
                                return d;
                            }());
            qInfo("interleaved %s%s: worst relative logit error prefill %.3g, decode %.3g; file "
                  "order decode vs prefill %.3g (output %s)",
                  tensor::type_name(type), tied ? " tied" : "", e_prefill, e_decode, rows_spread,
                  output_interleaved ? "interleaved" : "in rows");
            QVERIFY2(e_prefill <= 5e-2, qPrintable(QString::number(e_prefill)));
            QVERIFY2(e_decode <= 5e-2, qPrintable(QString::number(e_decode)));
            if (output_interleaved) QVERIFY(decode == prefill);
            // Prefill in file order takes the lane GEMM, whose packer reads rows, and must give
            // the groups' bits. 20 tokens reach it everywhere except for the K-quants at
            // AVX-512, whose lane GEMM starts at 32 (under it the rows take the row tile, which
            // sums in another order): those compare a 40-token prefill.
            const bool k_quant = tensor::traits(type).block_size == 256;
            if (k_quant && tensor::active_simd_level() == tensor::SimdLevel::Avx512) {
                const auto longer = sample_tokens(40, rows->config().vocab_size, 10);
                QVERIFY(test::run_sequence(*groups, longer, 64) ==
                        test::run_sequence(*rows, longer, 64));
            } else {
                QVERIFY(prefill == test::run_sequence(*rows, tokens, 64));
            }
        }
    }

    // A prefill's last layer computes queries, attention, the output projection and the FFN
    // only for the rows whose logits are wanted (keys and values for every row). One batch of
    // three sequences, the last token's logits wanted from the first, none from the second
    // (a prompt split over steps), all from the third, against the same batch with every row
    // wanted (nothing pruned): the kept rows agree with the float64 reference as matchesReference
    // bounds them and with the unpruned batch; the caches are the same, so the next decode step
    // gives the same logits bit for bit.
    void lastLayerOnlyForWantedRows_data() {
        QTest::addColumn<QString>("name");
        QTest::addColumn<int>("type");  // tensor::Type of the quantizable spec, or -1: F32
        for (const char* name : {"llama", "gemma3", "qwen2", "qwen3", "phi3", "smollm2"})
            QTest::newRow(name) << QString(name) << -1;
        QTest::newRow("F16 weights") << "quant_F16" << static_cast<int>(tensor::Type::F16);
        QTest::newRow("Q4_K weights") << "quant_Q4_K" << static_cast<int>(tensor::Type::Q4_K);
    }

    void lastLayerOnlyForWantedRows() {
        QFETCH(QString, name);
        QFETCH(int, type);
        const TinyModelSpec spec =
            type < 0 ? spec_named(name) : quantizable_spec(static_cast<tensor::Type>(type));
        const std::string path = test::tiny_model_path(name.toStdString(), spec);
        auto engine = runtime::Engine::load(path, options());
        const std::int64_t vocab = engine->config().vocab_size;
        const std::vector<std::vector<std::int32_t>> seqs = {
            sample_tokens(12, vocab, 21), sample_tokens(7, vocab, 22), sample_tokens(5, vocab, 23)};
        const runtime::LogitsWanted wanted[3] = {
            runtime::LogitsWanted::Last, runtime::LogitsWanted::None, runtime::LogitsWanted::All};
        // Prefill every sequence but its last token, then decode that token.
        auto run = [&](bool prune, std::vector<std::vector<float>>& prefill_rows,
                       std::vector<std::vector<float>>& decode_rows) {
            std::vector<kv::SeqId> ids;
            runtime::Batch batch;
            for (std::size_t i = 0; i < seqs.size(); ++i) {
                ids.push_back(engine->new_sequence_id());
                const auto n = static_cast<int>(seqs[i].size() - 1);
                if (!engine->kv().allocate_slots(ids[i], n)) return false;
                batch.chunks.push_back({ids[i],
                                        std::span(seqs[i]).first(static_cast<std::size_t>(n)), 0,
                                        prune ? wanted[i] : runtime::LogitsWanted::All, nullptr});
            }
            runtime::ForwardOutputs out;
            engine->forward(batch, out);
            for (std::size_t i = 0; i < seqs.size(); ++i) {
                if (wanted[i] == runtime::LogitsWanted::None) {
                    if (prune && out.first_row[i] != -1) return false;
                    continue;
                }
                // The rows of interest: the last one, or all of them. With pruning a chunk that
                // wants its last row gets that row alone.
                const auto n = static_cast<std::int64_t>(seqs[i].size() - 1);
                for (std::int64_t r = wanted[i] == runtime::LogitsWanted::Last ? n - 1 : 0; r < n;
                     ++r) {
                    const std::int64_t at =
                        prune && wanted[i] == runtime::LogitsWanted::Last ? 0 : r;
                    const auto row = out.row(out.first_row[i] + at);
                    prefill_rows.emplace_back(row.begin(), row.end());
                }
            }
            runtime::Batch step;
            for (std::size_t i = 0; i < seqs.size(); ++i) {
                if (!engine->kv().allocate_slots(ids[i], 1)) return false;
                step.chunks.push_back({ids[i], std::span(seqs[i]).last(1),
                                       static_cast<std::int64_t>(seqs[i].size() - 1),
                                       runtime::LogitsWanted::Last, nullptr});
            }
            engine->forward(step, out);
            for (std::size_t i = 0; i < seqs.size(); ++i) {
                const auto row = out.row(out.first_row[i]);
                decode_rows.emplace_back(row.begin(), row.end());
            }
            for (const auto id : ids) engine->kv().free_sequence(id);
            return true;
        };
        std::vector<std::vector<float>> pruned_prefill, pruned_decode, full_prefill, full_decode;
        QVERIFY(run(true, pruned_prefill, pruned_decode));
        QVERIFY(run(false, full_prefill, full_decode));
        // Rows: the first sequence's last prompt token, the third's 4 prompt tokens.
        QCOMPARE(pruned_prefill.size(), std::size_t{5});
        QCOMPARE(full_prefill.size(), std::size_t{5});

        // Against the float64 reference: each sequence alone, every position.
        std::vector<std::vector<std::vector<double>>> ref;
        for (const auto& s : seqs) ref.push_back(test::reference_forward(path, spec, s).logits);
        std::vector<std::vector<double>> expected_prefill = {ref[0][10]};
        for (std::size_t p = 0; p < 4; ++p) expected_prefill.push_back(ref[2][p]);
        const std::vector<std::vector<double>> expected_decode = {ref[0][11], ref[1][6], ref[2][4]};
        // matchesReference's bound for f32 weights, quantizedWeightsMatchReference's for the
        // others.
        const double bound = type < 0 || type == static_cast<int>(tensor::Type::F16) ? 1e-4 : 5e-2;
        const double prefill_err = worst_error(pruned_prefill, expected_prefill);
        const double decode_err = worst_error(pruned_decode, expected_decode);
        const double against_full = worst_error(pruned_prefill, full_prefill);
        qInfo("%s: pruned prefill vs reference %.3g, decode after it %.3g, vs unpruned %.3g",
              qPrintable(name), prefill_err, decode_err, against_full);
        QVERIFY2(prefill_err <= bound, qPrintable(QString::number(prefill_err)));
        QVERIFY2(decode_err <= bound, qPrintable(QString::number(decode_err)));
        QVERIFY2(against_full <= bound, qPrintable(QString::number(against_full)));
        // Same cache contents, same decode step: the same bits.
        QVERIFY(pruned_decode == full_decode);
    }

    // The pruned last layer keeps the rows a capture records there: with max_context 5, a
    // 12-token prefill that wants its last logits keeps rows 0-4 and 11 (two runs of one
    // chunk); a capture of layer 0 only leaves the last layer free to keep row 11 alone. The
    // captured rows and the logits agree with the float64 reference (the bounds of
    // attentionCaptureMatchesReference and matchesReference); rows the capture does not want
    // stay zero.
    void captureKeepsItsRowsInThePrunedLayer() {
        const TinyModelSpec spec = gemma_spec();
        const std::string path = test::tiny_model_path("gemma3", spec);
        auto engine = runtime::Engine::load(path, options());
        const auto tokens = sample_tokens(12, engine->config().vocab_size, 31);
        const auto ref = test::reference_forward(path, spec, tokens);
        for (const bool only_first_layer : {false, true}) {
            inspect::CaptureSpec cs;
            cs.enabled = true;
            cs.max_context = only_first_layer ? 2048 : 5;
            if (only_first_layer) cs.layers = {0};
            inspect::AttentionCapture capture(cs, static_cast<int>(spec.layers),
                                              static_cast<int>(spec.heads));
            const kv::SeqId seq = engine->new_sequence_id();
            QVERIFY(engine->kv().allocate_slots(seq, 12));
            runtime::Batch batch;
            batch.chunks.push_back(
                {seq, std::span(tokens), 0, runtime::LogitsWanted::Last, &capture});
            runtime::ForwardOutputs out;
            engine->forward(batch, out);
            const double logit_err =
                test::relative_error(out.row(out.first_row[0]), ref.logits[11]);
            double worst = 0.0;
            bool uncaptured_zero = true;
            for (int l = 0; l < spec.layers; ++l) {
                for (int h = 0; h < spec.heads; ++h) {
                    for (std::int64_t q = 0; q < 12; ++q) {
                        const auto row = capture.row(l, h, q);
                        const bool wanted = capture.wants(l, h) && capture.wants_position(q);
                        const auto& expected =
                            ref.attention[static_cast<std::size_t>(l)][static_cast<std::size_t>(h)]
                                         [static_cast<std::size_t>(q)];
                        for (std::size_t k = 0; k < row.size(); ++k) {
                            if (wanted) {
                                worst = std::max(worst, std::abs(row[k] - expected[k]));
                            } else if (row[k] != 0.0f) {
                                uncaptured_zero = false;
                            }
                        }
                    }
                }
            }
            engine->kv().free_sequence(seq);
            qInfo("capture of %s: logits %.3g, captured rows %.3g",
                  only_first_layer ? "layer 0" : "5 positions", logit_err, worst);
            QVERIFY2(logit_err <= 1e-4, qPrintable(QString::number(logit_err)));
            QVERIFY2(worst <= 1e-3, qPrintable(QString::number(worst)));
            QVERIFY(uncaptured_zero);
        }
    }

    void incrementalDecodeEqualsFullRecompute() {
        const std::string path = test::tiny_model_path("llama", TinyModelSpec{});
        auto engine = runtime::Engine::load(path, options(kv::ElementType::F16));
        const auto tokens = sample_tokens(20, engine->config().vocab_size, 11);
        const auto full = test::run_sequence(*engine, tokens, 64);
        const auto incremental = test::run_sequence(*engine, tokens, 1);
        const double err = worst_error(incremental, full);
        qInfo("incremental vs full: %.3g", err);
        QVERIFY2(err <= 1e-5, qPrintable(QString::number(err)));
    }

    // Four sequences of different lengths in one ragged batch (prefill chunks, then a step
    // mixing decode tokens with prefill chunks) give what each gives alone.
    void raggedBatchEqualsSingleRuns() {
        const TinyModelSpec spec = gemma_spec();
        const std::string path = test::tiny_model_path("gemma3", spec);
        auto engine = runtime::Engine::load(path, options(kv::ElementType::F16));
        const std::int64_t vocab = engine->config().vocab_size;
        std::vector<std::vector<std::int32_t>> seqs;
        for (std::uint32_t i = 0; i < 4; ++i) seqs.push_back(sample_tokens(6 + 3 * i, vocab, 100 + i));
        std::vector<std::vector<std::vector<float>>> alone;
        for (const auto& s : seqs) alone.push_back(test::run_sequence(*engine, s, 64));

        // Step 1: the first 5 tokens of every sequence; step 2: one token for sequences 0 and 1
        // (decode), the rest of 2 and 3 (prefill); then single tokens until all are done.
        std::vector<kv::SeqId> ids;
        std::vector<std::int64_t> done(4, 0);
        std::vector<std::vector<std::vector<float>>> batched(4);
        for (int i = 0; i < 4; ++i) ids.push_back(engine->new_sequence_id());
        runtime::ForwardOutputs out;
        for (int step = 0; ; ++step) {
            runtime::Batch batch;
            std::vector<int> which;
            for (int i = 0; i < 4; ++i) {
                const auto total = static_cast<std::int64_t>(seqs[static_cast<std::size_t>(i)].size());
                if (done[static_cast<std::size_t>(i)] == total) continue;
                std::int64_t n = step == 0 ? 5 : (step == 1 && i >= 2 ? total - done[static_cast<std::size_t>(i)] : 1);
                n = std::min(n, total - done[static_cast<std::size_t>(i)]);
                QVERIFY(engine->kv().allocate_slots(ids[static_cast<std::size_t>(i)], static_cast<int>(n)));
                batch.chunks.push_back({ids[static_cast<std::size_t>(i)],
                                        std::span(seqs[static_cast<std::size_t>(i)]).subspan(static_cast<std::size_t>(done[static_cast<std::size_t>(i)]), static_cast<std::size_t>(n)),
                                        done[static_cast<std::size_t>(i)], runtime::LogitsWanted::All, nullptr});
                which.push_back(i);
                done[static_cast<std::size_t>(i)] += n;
            }
            if (batch.chunks.empty()) break;
            engine->forward(batch, out);
            for (std::size_t c = 0; c < batch.chunks.size(); ++c) {
                for (std::size_t r = 0; r < batch.chunks[c].tokens.size(); ++r) {
                    const auto row = out.row(out.first_row[c] + static_cast<std::int64_t>(r));
                    batched[static_cast<std::size_t>(which[c])].emplace_back(row.begin(), row.end());
                }
            }
        }
        for (int i = 0; i < 4; ++i) {
            const double err = worst_error(batched[static_cast<std::size_t>(i)], alone[static_cast<std::size_t>(i)]);
            QVERIFY2(err <= 1e-5, qPrintable(QString("sequence %1: %2").arg(i).arg(err)));
        }
    }

    // Quantized weights: the reference dequantizes the same blocks, so the only difference is
    // the engine quantizing activations to 8 bits per block. Rounding error per element is
    // uniform in +-amax/254; for Gaussian activations amax is ~2.5 sigma (blocks of 32) to
    // ~3 sigma (blocks of 256), so each product carries ~0.5-0.7% relative RMS error. Nine
    // products run in sequence here (4 per layer x 2 layers + the output), adding in
    // quadrature to ~1.5-2%, amplified somewhat by the untrained random norms. Measured
    // 2.1-3.1%; the bound is 5e-2.
    void quantizedWeightsMatchReference_data() {
        QTest::addColumn<int>("type");
        QTest::newRow("Q8_0") << static_cast<int>(tensor::Type::Q8_0);
        QTest::newRow("Q4_K") << static_cast<int>(tensor::Type::Q4_K);
        QTest::newRow("Q6_K") << static_cast<int>(tensor::Type::Q6_K);
        QTest::newRow("Q5_0") << static_cast<int>(tensor::Type::Q5_0);
        QTest::newRow("F16") << static_cast<int>(tensor::Type::F16);
    }

    void quantizedWeightsMatchReference() {
        QFETCH(int, type);
        const auto t = static_cast<tensor::Type>(type);
        const TinyModelSpec spec = quantizable_spec(t);
        const std::string path = test::tiny_model_path(std::string("quant_") + tensor::type_name(t), spec);
        auto engine = runtime::Engine::load(path, options());
        const auto tokens = sample_tokens(10, engine->config().vocab_size, 3);
        const auto ref = test::reference_forward(path, spec, tokens);
        const double err = worst_error(test::run_sequence(*engine, tokens, 64), ref.logits);
        qInfo("%s weights: worst relative logit error %.3g", tensor::type_name(t), err);
        const double bound = t == tensor::Type::F16 ? 1e-4 : 5e-2;
        QVERIFY2(err <= bound, qPrintable(QString::number(err)));
    }

    // KV cache element types against the F32 cache: F16 rounds K and V to 11 significant bits
    // (relative 2^-11 ~ 5e-4 each), Q8 to 8 bits per row (max|x|/254 per element).
    void kvElementTypes() {
        const std::string path = test::tiny_model_path("llama", TinyModelSpec{});
        auto f32 = runtime::Engine::load(path, options(kv::ElementType::F32));
        const auto tokens = sample_tokens(24, f32->config().vocab_size, 5);
        const auto exact = test::run_sequence(*f32, tokens, 64);
        auto f16 = runtime::Engine::load(path, options(kv::ElementType::F16));
        auto q8 = runtime::Engine::load(path, options(kv::ElementType::Q8));
        const double e16 = worst_error(test::run_sequence(*f16, tokens, 64), exact);
        const double e8 = worst_error(test::run_sequence(*q8, tokens, 64), exact);
        qInfo("kv f16 %.3g, q8 %.3g", e16, e8);
        QVERIFY2(e16 <= 2e-3, qPrintable(QString::number(e16)));
        QVERIFY2(e8 <= 3e-2, qPrintable(QString::number(e8)));
    }

    // Captured attention rows equal the reference's softmax weights. Stored as f16: absolute
    // error <= 2^-11 for weights in [0, 1], plus float-vs-double noise: bound 1e-3.
    void attentionCaptureMatchesReference() {
        const TinyModelSpec spec = gemma_spec();
        const std::string path = test::tiny_model_path("gemma3", spec);
        auto engine = runtime::Engine::load(path, options());
        const auto tokens = sample_tokens(12, engine->config().vocab_size, 9);
        inspect::CaptureSpec cs;
        cs.enabled = true;
        inspect::AttentionCapture capture(cs, static_cast<int>(spec.layers), static_cast<int>(spec.heads));
        // Prefill 8 tokens, then decode 4: the lower triangle, then a row per step.
        const auto ref = test::reference_forward(path, spec, tokens);
        const kv::SeqId seq = engine->new_sequence_id();
        runtime::ForwardOutputs out;
        for (std::int64_t start = 0; start < 12; start += start < 8 ? 8 : 1) {
            const std::int64_t n = start < 8 ? 8 : 1;
            QVERIFY(engine->kv().allocate_slots(seq, static_cast<int>(n)));
            runtime::Batch batch;
            batch.chunks.push_back({seq, std::span(tokens).subspan(static_cast<std::size_t>(start), static_cast<std::size_t>(n)), start,
                                    runtime::LogitsWanted::Last, &capture});
            engine->forward(batch, out);
            QCOMPARE(capture.rows(), start + n);
        }
        double worst = 0.0;
        for (int l = 0; l < spec.layers; ++l) {
            for (int h = 0; h < spec.heads; ++h) {
                for (std::int64_t q = 0; q < 12; ++q) {
                    const auto row = capture.row(l, h, q);
                    const auto& expected = ref.attention[static_cast<std::size_t>(l)][static_cast<std::size_t>(h)][static_cast<std::size_t>(q)];
                    QCOMPARE(row.size(), expected.size());
                    for (std::size_t k = 0; k < row.size(); ++k) worst = std::max(worst, std::abs(row[k] - expected[k]));
                }
            }
        }
        qInfo("attention capture: worst absolute error %.3g over %lld rows", worst, static_cast<long long>(6 * 4 * 12));
        QVERIFY2(worst <= 1e-3, qPrintable(QString::number(worst)));
        // Only requested layers/heads are stored.
        inspect::CaptureSpec some;
        some.enabled = true;
        some.layers = {5};
        some.heads = {1};
        inspect::AttentionCapture partial(some, 6, 4);
        QVERIFY(partial.wants(5, 1));
        QVERIFY(!partial.wants(5, 0));
        QVERIFY(!partial.wants(0, 1));
    }
};

QTEST_GUILESS_MAIN(TestForward)
#include "test_forward.moc"
