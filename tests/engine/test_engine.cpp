// The Engine facade on a tiny model: greedy generation against the float64 reference,
// continuous batching, multi-turn reuse of the cache, chunked prefill, stop conditions,
// cancellation and attention capture through requests.
#include <QtTest>

#include "reference/reference_forward.h"
#include "reference/tiny_model.h"
#include "runtime/batch_demo.h"
#include "runtime/engine.h"
#include "util/error.h"

using namespace tokenscope;
using runtime::FinishReason;

namespace {

struct Result {
    std::vector<std::int32_t> tokens;
    std::string text;
    FinishReason reason = FinishReason::None;
    runtime::Timings timings;
};

std::unique_ptr<runtime::Engine> load(std::int64_t budget = 512, std::int64_t capacity = 1024) {
    runtime::EngineOptions o;
    o.threads = 2;
    o.token_budget = budget;
    o.kv_capacity_tokens = capacity;
    return runtime::Engine::load(test::tiny_model_path("llama", test::TinyModelSpec{}), o);
}

runtime::Request greedy(std::vector<std::int32_t> prompt, int max_tokens) {
    runtime::Request r;
    r.prompt = std::move(prompt);
    r.sampling.temperature = 0.0f;
    r.max_tokens = max_tokens;
    return r;
}

// Runs every submitted request to the end; results by request id.
std::map<runtime::RequestId, Result> run_all(runtime::Engine& e) {
    std::map<runtime::RequestId, Result> results;
    for (int guard = 0; e.has_work() && guard < 10000; ++guard) {
        for (const auto& ev : e.step()) {
            Result& r = results[ev.request];
            if (ev.token >= 0) r.tokens.push_back(ev.token);
            r.text += ev.text;
            r.timings = ev.timings;
            if (ev.finished) r.reason = ev.reason;
        }
    }
    return results;
}

Result run_one(runtime::Engine& e, runtime::Request r) {
    const auto id = e.submit(std::move(r));
    return run_all(e)[id];
}

std::vector<std::int32_t> prompt_of(const runtime::Engine& e, const char* text) {
    return e.tokenizer().encode(text, {.add_bos = true});
}

}  // namespace

class TestEngine : public QObject {
    Q_OBJECT

  private slots:
    // Greedy decoding picks, at every step, the argmax of the reference logits of the
    // sequence so far (checked where the top two reference logits are not within 1e-3, so a
    // float rounding cannot flip the choice).
    void greedyFollowsReference() {
        auto e = load();
        const auto prompt = prompt_of(*e, "The little robot walked into the garden and");
        const Result r = run_one(*e, greedy(prompt, 8));
        QCOMPARE(r.reason, FinishReason::MaxTokens);
        QCOMPARE(r.tokens.size(), std::size_t{8});
        std::vector<std::int32_t> seq = prompt;
        seq.insert(seq.end(), r.tokens.begin(), r.tokens.end() - 1);
        const auto ref = test::reference_forward(
            test::tiny_model_path("llama", test::TinyModelSpec{}), test::TinyModelSpec{}, seq);
        int checked = 0;
        for (std::size_t i = 0; i < r.tokens.size(); ++i) {
            const auto& row = ref.logits[prompt.size() - 1 + i];
            std::vector<double> sorted(row);
            std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
            if (sorted[0] - sorted[1] < 1e-3) continue;
            const auto argmax = std::max_element(row.begin(), row.end()) - row.begin();
            QCOMPARE(r.tokens[i], static_cast<std::int32_t>(argmax));
            ++checked;
        }
        QVERIFY(checked >= 6);
        QCOMPARE(r.timings.prompt_tokens, static_cast<std::int64_t>(prompt.size()));
        QCOMPARE(r.timings.prefilled_tokens, static_cast<std::int64_t>(prompt.size()));
    }

    // Requests joining and leaving at different steps give what each gives alone.
    void continuousBatchingEqualsSingleRuns() {
        auto e = load(/*budget=*/7);
        const std::vector<const char*> texts = {
            "Once upon a time", "The weather today is",
            "In the beginning there was a small village near the sea"};
        std::vector<Result> alone;
        for (const char* t : texts)
            alone.push_back(
                run_one(*e, greedy(prompt_of(*e, t), 6 + 2 * static_cast<int>(alone.size()))));
        std::vector<runtime::RequestId> ids;
        ids.push_back(e->submit(greedy(prompt_of(*e, texts[0]), 6)));
        e->step();  // the first request starts alone; the others join later
        ids.push_back(e->submit(greedy(prompt_of(*e, texts[1]), 8)));
        ids.push_back(e->submit(greedy(prompt_of(*e, texts[2]), 10)));
        auto together = run_all(*e);
        // The first request's first token came from the step above: compare from the results.
        for (int i = 1; i < 3; ++i)
            QCOMPARE(together[ids[static_cast<std::size_t>(i)]].tokens,
                     alone[static_cast<std::size_t>(i)].tokens);
        QCOMPARE(e->kv_stats().blocks_used, 0);  // all freed
    }

    // The next turn of a conversation prefills only the new tokens, and answers exactly as a
    // fresh engine given the whole conversation does.
    void multiTurnReusesTheCache() {
        auto e = load();
        runtime::Request first = greedy(prompt_of(*e, "Tell me about the moon."), 5);
        first.conversation = "chat-1";
        const Result turn1 = run_one(*e, first);
        std::vector<std::int32_t> history = first.prompt;
        history.insert(history.end(), turn1.tokens.begin(), turn1.tokens.end());
        const auto more = e->tokenizer().encode(" And the sun?");
        history.insert(history.end(), more.begin(), more.end());

        runtime::Request second = greedy(history, 5);
        second.conversation = "chat-1";
        const Result turn2 = run_one(*e, second);
        // The cache held the first prompt and every generated token but the last (sampled,
        // never run through the model): that many are reused, the rest prefilled.
        const auto reused =
            static_cast<std::int64_t>(first.prompt.size() + turn1.tokens.size() - 1);
        QCOMPARE(turn2.timings.reused_tokens, reused);
        QCOMPARE(turn2.timings.prefilled_tokens,
                 static_cast<std::int64_t>(history.size()) - reused);
        QVERIFY(e->kv_stats().blocks_used > 0);  // kept for the next turn

        auto fresh = load();
        QCOMPARE(run_one(*fresh, greedy(history, 5)).tokens, turn2.tokens);

        // Editing an earlier turn: only the common prefix is kept.
        std::vector<std::int32_t> edited(first.prompt.begin(), first.prompt.begin() + 3);
        const auto tail = e->tokenizer().encode(" about rivers.");
        edited.insert(edited.end(), tail.begin(), tail.end());
        runtime::Request third = greedy(edited, 3);
        third.conversation = "chat-1";
        const Result turn3 = run_one(*e, third);
        QCOMPARE(turn3.timings.reused_tokens, std::int64_t{3});
        QCOMPARE(run_one(*fresh, greedy(edited, 3)).tokens, turn3.tokens);
        e->drop_conversation("chat-1");
        QCOMPARE(e->kv_stats().blocks_used, 0);
    }

    // warm_up leaves the engine as loaded: no block used, no last write, the same tokens and
    // the same sequence id and block table for the next conversation as in an engine that never
    // warmed up; and it refuses to run beside a request.
    void warmUpLeavesNoTrace() {
        auto warm = load();
        auto cold = load();
        const kv::KvStats before = warm->kv_stats();
        warm->warm_up();
        const kv::KvStats after = warm->kv_stats();
        QCOMPARE(after.blocks_used, 0);
        QCOMPARE(after.blocks_free, before.blocks_free);
        QCOMPARE(after.last_write.seq, kv::SeqId{-1});
        QVERIFY(after.sequences.empty());
        runtime::Request r = greedy(prompt_of(*warm, "Tell me about the moon."), 6);
        r.conversation = "c";
        QCOMPARE(run_one(*warm, r).tokens, run_one(*cold, r).tokens);
        QCOMPARE(warm->conversation_sequence("c"), cold->conversation_sequence("c"));
        QCOMPARE(warm->kv().block_table(warm->conversation_sequence("c")),
                 cold->kv().block_table(cold->conversation_sequence("c")));

        warm->submit(greedy(prompt_of(*warm, "Again"), 4));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, warm->warm_up());
        run_all(*warm);
    }

    // A token budget smaller than the prompt prefills it in chunks, with the same result.
    void chunkedPrefill() {
        auto whole = load(512);
        auto chunked = load(3);
        const auto prompt =
            prompt_of(*whole, "A long prompt that will not fit in one step of three tokens");
        QCOMPARE(run_one(*chunked, greedy(prompt, 4)).tokens,
                 run_one(*whole, greedy(prompt, 4)).tokens);
    }

    void stopConditions() {
        auto e = load();
        const auto prompt = prompt_of(*e, "Once upon a time");
        const Result plain = run_one(*e, greedy(prompt, 12));
        QVERIFY(plain.text.size() > 4);
        // A stop string: the text ends right before it, and it is never streamed.
        runtime::Request r = greedy(prompt, 12);
        const std::string stop = plain.text.substr(plain.text.size() / 2, 3);
        r.stop_strings = {stop};
        const Result stopped = run_one(*e, r);
        QCOMPARE(stopped.reason, FinishReason::StopString);
        QCOMPARE(stopped.text, plain.text.substr(0, plain.text.find(stop)));
        // A stop token.
        runtime::Request t = greedy(prompt, 12);
        t.stop_tokens = {plain.tokens[3]};
        const Result by_token = run_one(*e, t);
        QCOMPARE(by_token.reason, FinishReason::StopToken);
        QCOMPARE(by_token.tokens.size(), std::size_t{4});
    }

    void cancelFreesTheCache() {
        auto e = load();
        const auto id = e->submit(greedy(prompt_of(*e, "Cancel me"), 100));
        e->step();
        e->step();
        e->cancel(id);
        const auto events = e->step();
        QCOMPARE(events.size(), std::size_t{1});
        QVERIFY(events[0].finished);
        QCOMPARE(events[0].reason, FinishReason::Cancelled);
        QVERIFY(!e->has_work());
        QCOMPARE(e->kv_stats().blocks_used, 0);
    }

    // More requests than the KV cache holds at once: the younger ones give their blocks back
    // to the older ones and compute their tokens again later (recompute preemption), so every
    // request still ends as it would alone (the tiny model's F32 weights compute a token the
    // same way in a chunk and in a decode step) and none is cut short with context_full.
    // 128 tokens of cache (8 blocks of 16); 4 requests of about 8 prompt tokens and 40 answer
    // tokens need 3-4 blocks each.
    void preemptionInsteadOfContextFull() {
        auto e = load(512, /*capacity=*/128);
        const std::vector<const char*> texts = {"Once upon a time", "The weather today is",
                                                "A small village near the sea",
                                                "The little robot walked into"};
        std::vector<Result> alone;
        for (const char* t : texts) alone.push_back(run_one(*e, greedy(prompt_of(*e, t), 40)));
        std::vector<runtime::RequestId> ids;
        for (const char* t : texts) ids.push_back(e->submit(greedy(prompt_of(*e, t), 40)));
        auto together = run_all(*e);
        for (std::size_t i = 0; i < texts.size(); ++i) {
            QCOMPARE(alone[i].reason, FinishReason::MaxTokens);
            QCOMPARE(together[ids[i]].reason, FinishReason::MaxTokens);
            QCOMPARE(together[ids[i]].tokens, alone[i].tokens);
        }
        QVERIFY2(e->preemptions() > 0, "the cache never ran out: the test does not test it");
        QCOMPARE(e->kv_stats().blocks_used, 0);
    }

    // The batch demo's timeline is the scheduler's own record: per step at most the budget,
    // a long prompt cut into budget-sized prefill chunks, one decode token per running request,
    // requests joining `stagger` steps apart, and preemption shown when the cache runs out.
    void batchDemoRecordsTheSchedule() {
        const std::int64_t budget = 8;
        auto e = load(budget, /*capacity=*/128);
        runtime::BatchDemoOptions o;
        std::vector<std::int32_t> long_prompt = prompt_of(*e, "A small village near the sea");
        while (long_prompt.size() < 20) long_prompt.push_back(long_prompt[1]);
        o.prompts = {long_prompt, prompt_of(*e, "Once upon a time"),
                     prompt_of(*e, "The weather today is"),
                     prompt_of(*e, "The little robot walked into")};
        o.max_tokens = 40;
        o.stagger_steps = 2;
        const auto r = runtime::run_batch_demo(*e, o);
        QCOMPARE(r.requests.size(), std::size_t(4));
        QVERIFY(!r.stopped);
        for (std::size_t i = 0; i < r.requests.size(); ++i) {
            QCOMPARE(r.requests[i].submit_step, static_cast<int>(2 * i));
            QCOMPARE(r.requests[i].finish_reason, std::string("max_tokens"));
            QCOMPARE(r.requests[i].generated_tokens, std::int64_t(40));
        }
        std::map<runtime::RequestId, std::int64_t> prefilled, decoded, first_chunk;
        bool preempted_seen = false;
        for (const auto& step : r.steps) {
            QCOMPARE(step.schedule.budget, budget);
            QVERIFY(step.schedule.scheduled_tokens() <= budget);
            for (const auto& entry : step.schedule.entries) {
                using K = runtime::ScheduleEntry::Kind;
                if (entry.kind == K::Prefill) {
                    prefilled[entry.request] += entry.tokens;
                    if (!first_chunk.count(entry.request))
                        first_chunk[entry.request] = entry.tokens;
                }
                if (entry.kind == K::Decode) {
                    QCOMPARE(entry.tokens, std::int64_t(1));
                    ++decoded[entry.request];
                }
                if (entry.kind == K::Waiting || entry.kind == K::Preempted)
                    QCOMPARE(entry.tokens, std::int64_t(0));
                preempted_seen |= entry.kind == K::Preempted;
            }
        }
        // The 20-token prompt went in budget-sized chunks: 8 first, in the first step.
        const auto first = r.requests[0].id;
        QCOMPARE(first_chunk[first], budget);
        QCOMPARE(r.steps[0].schedule.entries.size(), std::size_t(1));
        QVERIFY(r.requests[0].first_token_step >= 2);  // ceil(20 / 8) = 3 prefill steps
        for (const auto& req : r.requests) {
            // Every prompt token was computed at least once (more after a preemption), and each
            // token after the first came from a decode step or a recompute.
            QVERIFY(prefilled[req.id] >= req.prompt_tokens);
            QVERIFY(decoded[req.id] + (prefilled[req.id] - req.prompt_tokens) >= 39);
        }
        QVERIFY2(r.preemptions > 0 && preempted_seen,
                 "the cache never ran out: the test does not test preemption");
        QVERIFY(r.tokens_per_second > 0);
        QVERIFY(r.single_tokens_per_second > 0);
        QCOMPARE(e->kv_stats().blocks_used, 0);
    }

    void batchDemoStops() {
        auto e = load(8, 1024);
        runtime::BatchDemoOptions o;
        o.prompts = {prompt_of(*e, "Once upon a time"), prompt_of(*e, "The weather today is")};
        o.max_tokens = 200;
        o.on_step = [](int step) { return step < 5; };
        const auto r = runtime::run_batch_demo(*e, o);
        QVERIFY(r.stopped);
        QCOMPARE(r.steps.size(), std::size_t(6));
        QVERIFY(!e->has_work());
        QCOMPARE(e->kv_stats().blocks_used, 0);
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, runtime::run_batch_demo(*e, {}));
    }

    void contextFull() {
        auto e = load(512, /*capacity=*/16);
        std::vector<std::int32_t> prompt(40, 5);
        const Result r = run_one(*e, greedy(prompt, 4));
        QCOMPARE(r.reason, FinishReason::ContextFull);
        QCOMPARE(e->kv_stats().blocks_used, 0);
    }

    void badRequests() {
        auto e = load();
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, e->submit(greedy({}, 4)));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, e->submit(greedy({1, 99999}, 4)));
        runtime::Request bad = greedy({1, 2}, 4);
        bad.sampling.top_p = 2.0f;
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, e->submit(bad));
    }

    // Capture through a request: the prompt's lower triangle, then one row per generated
    // token that went through the model.
    void captureThroughRequest() {
        auto e = load();
        runtime::Request r = greedy(prompt_of(*e, "Look at me"), 4);
        r.capture.enabled = true;
        r.capture.layers = {1};
        const auto id = e->submit(r);
        run_all(*e);
        const inspect::AttentionCapture* c = e->capture(id);
        QVERIFY(c);
        QCOMPARE(c->rows(), static_cast<std::int64_t>(r.prompt.size() + 3));
        const auto row = c->row(1, 0, 2);
        double sum = 0;
        for (float w : row) sum += w;
        QVERIFY(std::abs(sum - 1.0) < 2e-3);
        QVERIFY(!c->wants(0, 0));
    }

    void samplingIsSeeded() {
        auto e = load();
        runtime::Request r = greedy(prompt_of(*e, "Random words"), 10);
        r.sampling.temperature = 1.0f;
        r.sampling.seed = 42;
        const Result a = run_one(*e, r);
        const Result b = run_one(*e, r);
        QCOMPARE(a.tokens, b.tokens);
    }
};

QTEST_GUILESS_MAIN(TestEngine)
#include "test_engine.moc"
