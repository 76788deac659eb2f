// Speculative decoding through the Engine on tiny synthetic models (F32 weights, so a chunk of
// several tokens and a single decode token give the same logits to the bit): greedy output
// identical to plain decoding for both proposers, inside continuous batching too; the KV cache
// after a run with rejections equal to one built without speculation (bookkeeping and K/V of
// every live position, target and draft); the sampled distribution equal to plain sampling's
// (chi-square); bad input refused with one clear line.
#include <QtTest>
#include <cmath>
#include <map>

#include "engine_test_helpers.h"
#include "reference/tiny_model.h"
#include "runtime/cpu_backend.h"
#include "runtime/engine.h"
#include "runtime/speculation/draft_proposer.h"
#include "util/error.h"
#include "util/test_paths.h"

using namespace tokenscope;
using runtime::SpeculationMode;
using runtime::speculation::TokenOrigin;

namespace {

// A prompt that repeats itself, so prompt lookup has something to propose; the tiny model's
// own continuation still differs from it often, so proposals are both accepted and rejected.
constexpr const char* kRepetitive =
    "the cat sat on the mat. the dog sat on the log. the cat sat on the mat. the dog sat on the";

std::string target_model() {
    return test::tiny_model_path("spec_target", test::TinyModelSpec{});
}
// Same vocabulary, other weights: a draft that disagrees with the target now and then.
std::string draft_model() {
    test::TinyModelSpec spec;
    spec.layers = 1;  // the target's first layer (same seed), without the second
    return test::tiny_model_path("spec_draft", spec);
}

runtime::EngineOptions options(SpeculationMode mode, int k = 4, bool adaptive = false) {
    runtime::EngineOptions o;
    o.threads = 2;
    o.kv_capacity_tokens = 2048;
    o.kv_type = kv::ElementType::F32;
    o.speculation.mode = mode;
    o.speculation.max_k = k;
    o.speculation.adaptive = adaptive;
    if (mode == SpeculationMode::Draft) o.speculation.draft_model = draft_model();
    return o;
}

struct Run {
    std::vector<std::int32_t> tokens;
    std::string text;
    runtime::FinishReason reason = runtime::FinishReason::None;
    runtime::speculation::Stats stats;
    std::map<TokenOrigin, int> origins;
};

std::map<runtime::RequestId, Run> run_all(runtime::Engine& e) {
    std::map<runtime::RequestId, Run> runs;
    for (int guard = 0; e.has_work() && guard < 100000; ++guard) {
        for (const auto& ev : e.step()) {
            Run& r = runs[ev.request];
            if (ev.token >= 0) {
                r.tokens.push_back(ev.token);
                ++r.origins[ev.speculation.origin];
            }
            r.text += ev.text;
            r.stats = ev.speculation.stats;
            if (ev.finished) r.reason = ev.reason;
        }
    }
    return runs;
}

runtime::Request request(const runtime::Engine& e, const char* text, int max_tokens,
                         float temperature = 0.0f) {
    runtime::Request r;
    r.prompt = e.tokenizer().encode(text, {.add_bos = true});
    r.sampling.temperature = temperature;
    r.max_tokens = max_tokens;
    return r;
}

Run run_one(runtime::Engine& e, runtime::Request r) {
    const auto id = e.submit(std::move(r));
    return run_all(e)[id];
}

// Every live position's K and V, all layers and heads, of `seq` in `engine`'s CPU cache.
std::vector<float> cache_contents(runtime::Engine& engine, kv::SeqId seq) {
    auto& backend = dynamic_cast<runtime::CpuBackend&>(engine.backend());
    const kv::CacheShape& shape = engine.kv().shape();
    std::vector<float> out, row(static_cast<std::size_t>(shape.head_dim));
    for (int pos = 0; pos < engine.kv().num_tokens(seq); ++pos) {
        const std::int64_t slot = engine.kv().slot(seq, pos);
        for (int l = 0; l < shape.layers; ++l) {
            for (int h = 0; h < shape.kv_heads; ++h) {
                backend.kv_storage().read_k(l, slot, h, row.data());
                out.insert(out.end(), row.begin(), row.end());
                backend.kv_storage().read_v(l, slot, h, row.data());
                out.insert(out.end(), row.begin(), row.end());
            }
        }
    }
    return out;
}

}  // namespace

class TestSpeculative : public QObject {
    Q_OBJECT

  private slots:
    void greedyLookupIsPlainDecoding() {
        auto plain = runtime::Engine::load(target_model(), options(SpeculationMode::Off));
        auto spec = runtime::Engine::load(target_model(), options(SpeculationMode::Lookup));
        for (const char* text : {kRepetitive, "Once upon a time there was a little robot."}) {
            const Run a = run_one(*plain, request(*plain, text, 48));
            const Run b = run_one(*spec, request(*spec, text, 48));
            QCOMPARE(b.tokens, a.tokens);
            QCOMPARE(b.text, a.text);
            QCOMPARE(b.reason, a.reason);
        }
        // The repetitive prompt exercised both outcomes.
        Run r = run_one(*spec, request(*spec, kRepetitive, 48));
        qInfo("lookup: %lld verifications, %lld of %lld accepted",
              static_cast<long long>(r.stats.verifications),
              static_cast<long long>(r.stats.accepted), static_cast<long long>(r.stats.proposed));
        QVERIFY(r.stats.accepted > 0);
        QVERIFY(r.stats.accepted < r.stats.proposed);
        QVERIFY(r.origins[TokenOrigin::Accepted] > 0 && r.origins[TokenOrigin::Corrected] > 0);
        QCOMPARE(plain->kv_stats().blocks_used, 0);
        QCOMPARE(spec->kv_stats().blocks_used, 0);
    }

    void greedyDraftIsPlainDecoding() {
        auto plain = runtime::Engine::load(target_model(), options(SpeculationMode::Off));
        auto spec = runtime::Engine::load(target_model(), options(SpeculationMode::Draft, 3));
        for (const char* text : {kRepetitive, "Once upon a time there was a little robot."}) {
            const Run a = run_one(*plain, request(*plain, text, 40));
            const Run b = run_one(*spec, request(*spec, text, 40));
            QCOMPARE(b.tokens, a.tokens);
            qInfo("draft: %lld verifications, %lld of %lld accepted",
                  static_cast<long long>(b.stats.verifications),
                  static_cast<long long>(b.stats.accepted),
                  static_cast<long long>(b.stats.proposed));
            QVERIFY(b.stats.verifications > 0);
            QVERIFY(b.stats.accepted < b.stats.proposed);  // the draft is another model
        }
        auto& draft = dynamic_cast<runtime::speculation::DraftProposer&>(*spec->proposer());
        QCOMPARE(draft.engine().kv_stats().blocks_used, 0);  // released with the requests
    }

    // Requests joining and leaving while others verify proposals give what each gives alone,
    // with several token budgets (a small one cuts k).
    void continuousBatching() {
        const std::vector<const char*> texts = {
            kRepetitive, "In the beginning there was a small village near the sea",
            "the cat sat on the mat. the cat sat on the"};
        auto plain = runtime::Engine::load(target_model(), options(SpeculationMode::Off));
        std::vector<Run> alone;
        for (const char* t : texts) alone.push_back(run_one(*plain, request(*plain, t, 30)));
        for (SpeculationMode mode : {SpeculationMode::Lookup, SpeculationMode::Draft}) {
            for (std::int64_t budget : {512, 6}) {
                auto o = options(mode);
                o.token_budget = budget;
                auto e = runtime::Engine::load(target_model(), o);
                std::vector<runtime::RequestId> ids;
                ids.push_back(e->submit(request(*e, texts[0], 30)));
                std::map<runtime::RequestId, Run> together;
                for (int i = 0; i < 4; ++i) {
                    for (const auto& ev : e->step())
                        together[ev.request].tokens.push_back(ev.token);
                }
                ids.push_back(e->submit(request(*e, texts[1], 30)));
                ids.push_back(e->submit(request(*e, texts[2], 30)));
                for (auto& [id, run] : run_all(*e)) {
                    auto& t = together[id].tokens;
                    t.insert(t.end(), run.tokens.begin(), run.tokens.end());
                }
                for (std::size_t i = 0; i < texts.size(); ++i)
                    QCOMPARE(together[ids[i]].tokens, alone[i].tokens);
                QCOMPARE(e->kv_stats().blocks_used, 0);
            }
        }
    }

    // After a run with rejections, the cache a conversation keeps equals the one a run without
    // speculation keeps: same token count, same block table, same pool use, and the same K and
    // V at every live position (F32 cache and weights: equal to the bit).
    void rollbackLeavesThePlainCache() {
        for (SpeculationMode mode : {SpeculationMode::Lookup, SpeculationMode::Draft}) {
            auto plain = runtime::Engine::load(target_model(), options(SpeculationMode::Off));
            auto spec = runtime::Engine::load(target_model(), options(mode));
            runtime::Request a = request(*plain, kRepetitive, 37);
            a.conversation = "c";
            runtime::Request b = a;
            run_one(*plain, a);
            const Run r = run_one(*spec, b);
            QVERIFY(r.stats.accepted < r.stats.proposed);  // rejections happened
            const kv::SeqId ps = plain->conversation_sequence("c"),
                            ss = spec->conversation_sequence("c");
            QVERIFY(ps >= 0 && ss >= 0);
            QCOMPARE(spec->kv().num_tokens(ss), plain->kv().num_tokens(ps));
            QCOMPARE(spec->kv().block_table(ss), plain->kv().block_table(ps));
            const kv::KvStats st = spec->kv_stats(), pt = plain->kv_stats();
            QCOMPARE(st.blocks_used, pt.blocks_used);
            QCOMPARE(st.tokens_stored, pt.tokens_stored);
            QCOMPARE(st.block_refs, pt.block_refs);
            QVERIFY(cache_contents(*spec, ss) == cache_contents(*plain, ps));
        }
    }

    // The attention capture after rejections: between steps it holds rows only for the tokens
    // the model has been fed and kept (a rejected proposal's row would otherwise stay at the
    // position of the token that replaced it, and the app's heatmap would show it), and at the
    // end every row equals the plain run's (F32 weights and cache: the same weights to the bit).
    void captureKeepsOnlyAcceptedRows() {
        for (SpeculationMode mode : {SpeculationMode::Lookup, SpeculationMode::Draft}) {
            auto plain = runtime::Engine::load(target_model(), options(SpeculationMode::Off));
            auto spec = runtime::Engine::load(target_model(), options(mode));
            runtime::Request a = request(*plain, kRepetitive, 37);
            a.capture.enabled = true;
            const auto plain_id = plain->submit(a);
            run_all(*plain);
            const auto id = spec->submit(a);
            std::int64_t newest = -1;
            int rejections = 0;
            for (int guard = 0; spec->has_work() && guard < 1000; ++guard) {
                for (const auto& ev : spec->step()) {
                    if (ev.token >= 0) newest = ev.position;
                    rejections += ev.speculation.origin == TokenOrigin::Corrected;
                }
                const inspect::AttentionCapture* c = spec->capture(id);
                QVERIFY(c != nullptr);
                // The newest token has not been fed yet: rows for positions [0, newest).
                QVERIFY2(
                    c->rows() <= newest,
                    qPrintable(QString("%1 rows, newest token at %2").arg(c->rows()).arg(newest)));
            }
            QVERIFY(rejections > 0);
            const inspect::AttentionCapture* want = plain->capture(plain_id);
            const inspect::AttentionCapture* got = spec->capture(id);
            QCOMPARE(got->rows(), want->rows());
            const auto& config = plain->config();
            for (int l = 0; l < int(config.layers); ++l) {
                for (int h = 0; h < int(config.heads); ++h) {
                    for (std::int64_t pos = 0; pos < want->rows(); ++pos)
                        QVERIFY(got->row(l, h, pos) == want->row(l, h, pos));
                }
            }
        }
    }

    // The draft's own cache stays in step: mid-run, it holds a prefix of the target's
    // sequence, and its K/V equal those of a draft cache fed the same tokens plainly.
    void draftCacheInStep() {
        auto spec = runtime::Engine::load(target_model(), options(SpeculationMode::Draft, 3));
        runtime::Request r = request(*spec, kRepetitive, 40);
        std::vector<std::int32_t> tokens = r.prompt;
        const auto id = spec->submit(r);
        (void)id;
        auto& proposer = dynamic_cast<runtime::speculation::DraftProposer&>(*spec->proposer());
        auto reference = runtime::Engine::load(draft_model(), options(SpeculationMode::Off));
        int checked = 0;
        for (int step = 0; step < 12 && spec->has_work(); ++step) {
            for (const auto& ev : spec->step()) tokens.push_back(ev.token);
            const kv::SeqId ds = proposer.draft_sequence(1);
            if (ds < 0 || !spec->has_work()) continue;
            auto& draft = proposer.engine();
            const int held = draft.kv().num_tokens(ds);
            QVERIFY(held <= static_cast<int>(tokens.size()) - 1);
            // Plain feeding of the same tokens: the prompt as one chunk, then one at a time.
            const kv::SeqId rs = reference->new_sequence_id();
            runtime::ForwardOutputs out;
            for (int pos = 0; pos < held;) {
                const int n = pos == 0 ? std::min<int>(held, static_cast<int>(r.prompt.size())) : 1;
                QVERIFY(reference->kv().allocate_slots(rs, n));
                runtime::Batch batch;
                batch.chunks.push_back({rs,
                                        std::span(tokens).subspan(static_cast<std::size_t>(pos),
                                                                  static_cast<std::size_t>(n)),
                                        pos, runtime::LogitsWanted::Last, nullptr});
                reference->forward(batch, out);
                pos += n;
            }
            QVERIFY(cache_contents(draft, ds) == cache_contents(*reference, rs));
            reference->kv().free_sequence(rs);
            ++checked;
        }
        QVERIFY(checked >= 5);
    }

    // Speculative sampling draws from the target's distribution. With max_tokens 3 and k = 1,
    // the second token is always the outcome of the acceptance rule (accepted draft token or a
    // draw from the residual) given the first. Over N = 3000 requests (seeds 1..N) the pairs
    // (t1, t2) are compared with the exact target probabilities p(t1) p(t2 | t1) from plain
    // forward passes and the Sampler's own shaped distribution (temperature 1, top-k 4: 16
    // cells). Pearson's X^2 = sum (O - E)^2 / E over the cells with E >= 5 (the others pooled
    // into one) has (cells - 1) degrees of freedom; the bound is the chi-square 0.999 quantile
    // for that count (at most 15 df: 37.70), so a correct implementation fails with probability
    // 0.001 and, with fixed seeds, never. A draft unlike the target makes rejections common.
    void samplingMatchesTargetDistribution_data() {
        QTest::addColumn<int>("mode");
        QTest::newRow("draft") << static_cast<int>(SpeculationMode::Draft);
        QTest::newRow("lookup") << static_cast<int>(SpeculationMode::Lookup);
    }
    void samplingMatchesTargetDistribution() {
        QFETCH(int, mode);
        auto o = options(static_cast<SpeculationMode>(mode), 1);
        auto spec = runtime::Engine::load(target_model(), o);
        // Lookup needs the first token to occur in the prompt: a prompt made of the target's
        // own likely tokens (built below from its top-4) is repeated.
        runtime::SamplingParams sp;
        sp.temperature = 1.0f;
        sp.top_k = 4;
        sp.top_p = 1.0f;
        sp.min_p = 0.0f;
        std::vector<std::int32_t> prompt =
            spec->tokenizer().encode("the cat sat on the", {.add_bos = true});
        auto plain = test::load_for_reference_check(target_model());
        auto shaped = [&](const std::vector<std::int32_t>& seq) {
            const auto rows = test::run_sequence(*plain, seq, 64);
            runtime::Sampler s(sp);
            std::map<std::int32_t, double> p;
            for (const auto& c : s.shape(rows.back(), seq).items) p[c.id] = c.probability;
            return p;
        };
        if (mode == static_cast<int>(SpeculationMode::Lookup)) {
            // Lookup proposes what followed the latest n-gram earlier: put triples (the tail's
            // last token, a candidate, the target's likeliest next token after it) before a
            // fixed tail, so the 2-gram (tail end, first token) is found with the likeliest
            // continuation after it; repeat until the triples cover the prompt's own candidates
            // (a fixed point, found in a few rounds).
            const std::vector<std::int32_t> tail(prompt.begin() + 1, prompt.end());
            std::map<std::int32_t, std::int32_t> pairs;
            for (int round = 0; round < 20; ++round) {
                prompt.assign(1, prompt.front());
                for (const auto& [t, next] : pairs) {
                    prompt.push_back(tail.back());
                    prompt.push_back(t);
                    prompt.push_back(next);
                }
                prompt.insert(prompt.end(), tail.begin(), tail.end());
                bool changed = false;
                for (const auto& [t, pt] : shaped(prompt)) {
                    auto seq = prompt;
                    seq.push_back(t);
                    const auto after = shaped(seq);
                    const auto best = std::max_element(after.begin(), after.end(),
                                                       [](const auto& a, const auto& b) {
                                                           return a.second < b.second;
                                                       })
                                          ->first;
                    if (!pairs.count(t) || pairs[t] != best) changed = true;
                    pairs[t] = best;
                }
                if (!changed) break;
            }
        }
        std::map<std::pair<std::int32_t, std::int32_t>, double> expected;
        for (const auto& [t1, p1] : shaped(prompt)) {
            auto seq = prompt;
            seq.push_back(t1);
            for (const auto& [t2, p2] : shaped(seq)) expected[{t1, t2}] = p1 * p2;
        }
        constexpr int kRuns = 3000;
        std::map<std::pair<std::int32_t, std::int32_t>, double> observed;
        std::int64_t verifications = 0, rejected = 0, accepted = 0;
        for (int seed = 1; seed <= kRuns; ++seed) {
            runtime::Request r;
            r.prompt = prompt;
            r.sampling = sp;
            r.sampling.seed = static_cast<std::uint64_t>(seed);
            r.max_tokens = 3;
            const Run run = run_one(*spec, r);

            QVERIFY(run.tokens.size() >= 2);
            observed[{run.tokens[0], run.tokens[1]}] += 1;
            verifications += run.stats.verifications;
            rejected += run.stats.proposed - run.stats.accepted;
            accepted += run.stats.accepted;
        }
        double chi2 = 0.0, pooled_o = 0.0, pooled_e = 0.0;
        int cells = 0;
        for (const auto& [cell, p] : expected) {
            const double e = p * kRuns, obs = observed.count(cell) ? observed[cell] : 0.0;
            if (e < 5.0) {
                pooled_e += e;
                pooled_o += obs;
                continue;
            }
            chi2 += (obs - e) * (obs - e) / e;
            ++cells;
        }
        if (pooled_e > 0.0) {
            chi2 += (pooled_o - pooled_e) * (pooled_o - pooled_e) / pooled_e;
            ++cells;
        }
        double outside = 0.0;  // pairs the target cannot produce
        for (const auto& [cell, n] : observed) {
            if (!expected.count(cell)) outside += n;
        }
        // 0.999 quantiles of chi-square with 1..15 degrees of freedom.
        static const double kCritical[] = {0,     10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32,
                                           26.12, 27.88, 29.59, 31.26, 32.91, 34.53, 36.12, 37.70};
        const int df = cells - 1;
        QVERIFY(df >= 3 && df <= 15);
        qInfo(
            "X^2 = %.2f, %d df, critical %.2f; %lld verifications, %lld proposals accepted, %lld "
            "rejected",
            chi2, df, kCritical[df], static_cast<long long>(verifications),
            static_cast<long long>(accepted), static_cast<long long>(rejected));
        QCOMPARE(outside, 0.0);
        QVERIFY2(chi2 < kCritical[df], qPrintable(QString::number(chi2)));
        QVERIFY(verifications > kRuns / 2);
        QVERIFY(rejected > kRuns / 20);  // both branches of the rule ran often
        QVERIFY(accepted > kRuns / 20);
    }

    // Switching speculation between requests keeps the target and its cached conversations:
    // the next turn reuses the cached prefix, the output is still plain greedy decoding, a
    // draft that fails to load leaves the previous setup, and no switch happens mid-request.
    void switchingSpeculationKeepsTheCache() {
        auto plain = runtime::Engine::load(target_model(), options(SpeculationMode::Off));
        auto e = runtime::Engine::load(target_model(), options(SpeculationMode::Off));
        QVERIFY(e->proposer() == nullptr);
        runtime::Request first = request(*e, kRepetitive, 16);
        first.conversation = "c";
        const std::vector<std::int32_t> prompt = first.prompt;
        const Run turn1 = run_one(*e, first);
        const kv::SeqId seq = e->conversation_sequence("c");
        QVERIFY(seq >= 0);

        auto lookup = options(SpeculationMode::Lookup).speculation;
        e->set_speculation(lookup);
        QVERIFY(e->proposer() != nullptr);
        QCOMPARE(QString(e->proposer()->name()), QString("lookup"));
        QCOMPARE(e->conversation_sequence("c"), seq);  // the cached turn survived the switch

        // Turn 2 continues the conversation: everything up to turn 1's output is cached.
        std::vector<std::int32_t> prompt2 = prompt;
        prompt2.insert(prompt2.end(), turn1.tokens.begin(), turn1.tokens.end());
        const auto more = e->tokenizer().encode(" the cat sat on the mat.", {.add_bos = false});
        prompt2.insert(prompt2.end(), more.begin(), more.end());
        runtime::Request second;
        second.prompt = prompt2;
        second.sampling.temperature = 0.0f;
        second.max_tokens = 24;
        second.conversation = "c";
        const auto id = e->submit(second);
        std::int64_t reused = -1;
        Run turn2;
        for (int guard = 0; e->has_work() && guard < 10000; ++guard) {
            for (const auto& ev : e->step()) {
                if (ev.request != id) continue;
                if (reused < 0 && ev.token >= 0) reused = ev.timings.reused_tokens;
                if (ev.token >= 0) turn2.tokens.push_back(ev.token);
                turn2.stats = ev.speculation.stats;
            }
            // No switch while a request runs.
            if (e->has_work()) QVERIFY_THROWS_EXCEPTION(InvalidArgument, e->set_speculation(lookup));
        }
        // The cache held the prompt and all of turn 1's output but the last token (its K/V
        // are computed when it is fed back).
        QCOMPARE(reused, static_cast<std::int64_t>(prompt.size() + turn1.tokens.size()) - 1);
        QVERIFY(turn2.stats.verifications > 0);
        runtime::Request alone;
        alone.prompt = prompt2;
        alone.sampling.temperature = 0.0f;
        alone.max_tokens = 24;
        QCOMPARE(turn2.tokens, run_one(*plain, alone).tokens);

        // A draft that cannot load (a missing file) leaves prompt lookup in place.
        auto bad = options(SpeculationMode::Draft).speculation;
        bad.draft_model = "/nonexistent/draft.gguf";
        QVERIFY_THROWS_EXCEPTION(Error, e->set_speculation(bad));
        QVERIFY(e->proposer() != nullptr);
        QCOMPARE(e->options().speculation.mode, SpeculationMode::Lookup);
        auto bad_k = lookup;
        bad_k.max_k = 0;
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, e->set_speculation(bad_k));
        QCOMPARE(e->options().speculation.max_k, lookup.max_k);

        // And a draft model that does load, then off again.
        e->set_speculation(options(SpeculationMode::Draft, 3).speculation);
        QCOMPARE(e->options().speculation.mode, SpeculationMode::Draft);
        QVERIFY(dynamic_cast<runtime::speculation::DraftProposer*>(e->proposer()) != nullptr);
        e->set_speculation(runtime::SpeculationOptions{});
        QVERIFY(e->proposer() == nullptr);
        QCOMPARE(e->conversation_sequence("c"), seq);
    }

    void badInput() {
        auto o = options(SpeculationMode::Lookup, 0);
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, runtime::Engine::load(target_model(), o));
        o.speculation.max_k = runtime::kMaxSpeculationK + 1;
        try {
            runtime::Engine::load(target_model(), o);
            QFAIL("k out of range accepted");
        } catch (const InvalidArgument& e) {
            QCOMPARE(QString(e.what()), QString("speculation: k = 15 is out of range (1 to 14)"));
        }
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, runtime::parse_speculation("draft:"));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, runtime::parse_speculation("ngram"));
        // A draft with another vocabulary: the real SmolLM2 (49152 tokens) for the tiny target.
        const std::string other = test::smollm2_model();
        if (other.empty())
            QSKIP(
                "SmolLM2 is not installed: the vocabulary check is covered by test_cli_generation");
        o = options(SpeculationMode::Draft);
        o.speculation.draft_model = other;
        try {
            runtime::Engine::load(target_model(), o);
            QFAIL("a draft with another vocabulary was accepted");
        } catch (const FormatError& e) {
            const QString message(e.what());
            QVERIFY2(message.contains("vocabulary") && !message.contains('\n'),
                     qPrintable(message));
        }
    }
};

QTEST_GUILESS_MAIN(TestSpeculative)
#include "test_speculative.moc"
