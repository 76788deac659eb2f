#include "bench_speculation.h"

#include <cstdio>

#include "runtime/prompt_builder.h"
#include "table.h"
#include "util/json_writer.h"

namespace tokenscope::cli {

namespace {

struct Prompt {
    const char* kind;  // "grounded" or "open"
    const char* name;
    const char* text;
};

// Fixed prompts: the grounded ones carry the text the answer should quote.
const Prompt kPrompts[] = {
    {"grounded", "edit-code",
     "Rename the variable `total` to `sum` in this Python function and give back the whole "
     "function:\n\n"
     "def average(values):\n"
     "    total = 0\n"
     "    count = 0\n"
     "    for value in values:\n"
     "        total = total + value\n"
     "        count = count + 1\n"
     "    if count == 0:\n"
     "        return 0\n"
     "    return total / count\n"},
    {"grounded", "summarise-quoting",
     "Summarise this paragraph in two sentences, quoting its most important sentence word for "
     "word:\n\n"
     "The river flooded the lower town every spring. In 1852 the council built a stone wall along "
     "the east "
     "bank, paid for by a tax on the market. Since the wall was finished, the water has never "
     "reached the "
     "market square, and the lower town has grown into the busiest part of the city."},
    {"grounded", "answer-from-text",
     "Read the text and answer the question using the text's own words.\n\n"
     "Text: The Hubble Space Telescope was launched into low Earth orbit in 1990 and remains in "
     "operation. "
     "It has a 2.4-metre mirror, and its four main instruments observe in the ultraviolet, visible "
     "and "
     "near-infrared regions of the electromagnetic spectrum.\n\n"
     "Question: When was the Hubble Space Telescope launched, and how large is its mirror?"},
    {"open", "poem", "Write a short poem about autumn leaves."},
    {"open", "story", "Tell me a story about a dragon who is afraid of the dark."},
    {"open", "advice", "What are some good ways to stay focused while studying?"},
};

struct Measure {
    double decode_ms = 0;
    std::int64_t tokens = 0;  // after the first (the first comes from the prefill)
    runtime::speculation::Stats stats;
    std::vector<std::int32_t> output;
};

Measure generate(runtime::Engine& engine, runtime::Request request) {
    const auto id = engine.submit(std::move(request));
    Measure m;
    runtime::Timings t;
    while (engine.has_work()) {
        for (const auto& e : engine.step()) {
            if (e.request != id) continue;
            if (e.token >= 0) m.output.push_back(e.token);
            t = e.timings;
            m.stats = e.speculation.stats;
        }
    }
    m.decode_ms = t.decode_ms;
    m.tokens = t.generated_tokens - 1;
    return m;
}

struct Row {
    const Prompt* prompt = nullptr;
    Measure plain, spec;
    bool identical = true;
};

double tps(const Measure& m) {
    return m.decode_ms > 0 ? static_cast<double>(m.tokens) / (m.decode_ms / 1000.0) : 0.0;
}

struct Summary {
    double plain_ms = 0, spec_ms = 0;
    std::int64_t plain_tokens = 0, spec_tokens = 0, verifications = 0, proposed = 0, accepted = 0;
    bool identical = true;
    void add(const Row& r) {
        plain_ms += r.plain.decode_ms;
        spec_ms += r.spec.decode_ms;
        plain_tokens += r.plain.tokens;
        spec_tokens += r.spec.tokens;
        verifications += r.spec.stats.verifications;
        proposed += r.spec.stats.proposed;
        accepted += r.spec.stats.accepted;
        identical = identical && r.identical;
    }
    double plain_tps() const {
        return plain_ms > 0 ? static_cast<double>(plain_tokens) / (plain_ms / 1000.0) : 0;
    }
    double spec_tps() const {
        return spec_ms > 0 ? static_cast<double>(spec_tokens) / (spec_ms / 1000.0) : 0;
    }
    double rate() const {
        return proposed > 0 ? static_cast<double>(accepted) / static_cast<double>(proposed) : 0;
    }
    double mean() const {
        return verifications > 0
                   ? static_cast<double>(accepted) / static_cast<double>(verifications)
                   : 0;
    }
};

}  // namespace

void bench_speculation(runtime::Engine& engine, int n_tokens, int repeats, bool json) {
    const runtime::PromptBuilder builder(engine, std::nullopt);
    std::vector<Row> rows;
    // Warm-up: the weights' pages and the cost model's first measurements.
    {
        runtime::Request warm = builder.chat({{"user", "Hello"}});
        warm.sampling.temperature = 0.0f;
        warm.max_tokens = 8;
        generate(engine, warm);
    }
    for (int rep = 0; rep < repeats; ++rep) {
        for (const Prompt& p : kPrompts) {
            runtime::Request r = builder.chat({{"user", p.text}});
            r.sampling.temperature = 0.0f;
            r.max_tokens = n_tokens;
            r.stop_strings.clear();  // the same token count on both sides, where EOS allows
            Row row;
            row.prompt = &p;
            r.speculate = false;
            row.plain = generate(engine, r);
            r.speculate = true;
            row.spec = generate(engine, r);
            row.identical = row.plain.output == row.spec.output;
            rows.push_back(std::move(row));
        }
    }
    Summary kinds[2];
    for (const Row& r : rows) kinds[std::string(r.prompt->kind) == "grounded" ? 0 : 1].add(r);
    const char* kind_names[2] = {"grounded", "open"};
    const auto& spec = engine.options().speculation;
    if (json) {
        JsonWriter w;
        w.begin_object();
        w.key("model").value(engine.file().path());
        w.key("backend").value(engine.backend_name());
        w.key("speculative").value(runtime::speculation_mode_name(spec.mode));
        if (spec.mode == runtime::SpeculationMode::Draft)
            w.key("draft_model").value(spec.draft_model);
        w.key("max_k").value(spec.max_k);
        w.key("adaptive").value(spec.adaptive);
        w.key("tokens_per_prompt").value(n_tokens);
        w.key("repeats").value(repeats);
        for (int k = 0; k < 2; ++k) {
            const Summary& s = kinds[k];
            w.key(kind_names[k]).begin_object();
            w.key("acceptance_rate").value(s.rate());
            w.key("mean_accepted_per_verification").value(s.mean());
            w.key("verifications").value(s.verifications);
            w.key("plain_tokens_per_s").value(s.plain_tps());
            w.key("speculative_tokens_per_s").value(s.spec_tps());
            w.key("speedup").value(s.plain_tps() > 0 ? s.spec_tps() / s.plain_tps() : 0.0);
            w.key("identical_output").value(s.identical);
            w.end_object();
        }
        w.key("prompts").begin_array();
        for (const Row& r : rows) {
            w.begin_object();
            w.key("kind").value(r.prompt->kind);
            w.key("name").value(r.prompt->name);
            w.key("tokens").value(r.spec.tokens + 1);
            w.key("acceptance_rate").value(r.spec.stats.acceptance_rate());
            w.key("mean_accepted_per_verification").value(r.spec.stats.mean_accepted());
            w.key("verifications").value(r.spec.stats.verifications);
            w.key("proposed").value(r.spec.stats.proposed);
            w.key("plain_tokens_per_s").value(tps(r.plain));
            w.key("speculative_tokens_per_s").value(tps(r.spec));
            w.key("speedup").value(tps(r.plain) > 0 ? tps(r.spec) / tps(r.plain) : 0.0);
            w.key("identical_output").value(r.identical);
            w.end_object();
        }
        w.end_array();
        w.end_object();
        std::printf("%s\n", w.str().c_str());
        return;
    }
    std::printf(
        "%s on %s: speculative %s (k up to %d%s) against plain decoding, greedy, %d tokens per "
        "prompt\n\n",
        engine.file().path().c_str(), engine.backend_name().c_str(),
        runtime::speculation_mode_name(spec.mode), spec.max_k, spec.adaptive ? ", adaptive" : "",
        n_tokens);
    Table table({"prompt", "kind", "accepted", "per verify", "plain tok/s", "spec tok/s", "speedup",
                 "same output"},
                {false, false, true, true, true, true, true, false});
    char a[32], b[32], c[32], d[32], e[32];
    for (const Row& r : rows) {
        std::snprintf(a, sizeof a, "%.0f%%", 100 * r.spec.stats.acceptance_rate());
        std::snprintf(b, sizeof b, "%.2f", r.spec.stats.mean_accepted());
        std::snprintf(c, sizeof c, "%.1f", tps(r.plain));
        std::snprintf(d, sizeof d, "%.1f", tps(r.spec));
        std::snprintf(e, sizeof e, "%.2fx", tps(r.plain) > 0 ? tps(r.spec) / tps(r.plain) : 0.0);
        table.add_row({r.prompt->name, r.prompt->kind, a, b, c, d, e, r.identical ? "yes" : "NO"});
    }
    for (int k = 0; k < 2; ++k) {
        const Summary& s = kinds[k];
        std::snprintf(a, sizeof a, "%.0f%%", 100 * s.rate());
        std::snprintf(b, sizeof b, "%.2f", s.mean());
        std::snprintf(c, sizeof c, "%.1f", s.plain_tps());
        std::snprintf(d, sizeof d, "%.1f", s.spec_tps());
        std::snprintf(e, sizeof e, "%.2fx", s.plain_tps() > 0 ? s.spec_tps() / s.plain_tps() : 0.0);
        table.add_row({std::string("all ") + kind_names[k], kind_names[k], a, b, c, d, e,
                       s.identical ? "yes" : "NO"});
    }
    std::printf("%s", table.render().c_str());
}

}  // namespace tokenscope::cli
