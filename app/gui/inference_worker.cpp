#include "inference_worker.h"

#include <QDateTime>
#include <QElapsedTimer>
#include <QFile>
#include <QThread>
#include <algorithm>

#include "inspect/model_cost.h"
#include "model_summary.h"
#include "runtime/engine.h"
#include "runtime/prompt_builder.h"
#include "speculation_meter.h"
#include "util/error.h"

namespace tokenscope::app {

namespace {
// Attention matrices are O(n^2) to gather, copy and render: while tokens stream they are resent
// at most every 250 ms, and less often as the context grows, so that their cost per second
// stays about that of a 700-token matrix every 250 ms (2,000 tokens: every 2 s). On two cores
// the engine, the heatmap render and the GUI thread compete, and at long contexts a faster
// rate stalled the GUI thread past 50 ms. The final matrix is always sent when the reply ends.
qint64 attention_interval_ms(qsizetype context_tokens) {
    const double n = static_cast<double>(context_tokens);
    return std::max<qint64>(250, static_cast<qint64>(500.0 * n * n / 1.0e6));
}
// The other panels are refreshed at most this often: a fast model makes hundreds of steps a
// second and the GUI only needs a few frames' worth of updates.
constexpr qint64 kPanelIntervalMs = 100;
constexpr std::int64_t kCaptureContext = 2048;
constexpr int kCandidates = 20;

ui::TokenData to_token_data(const runtime::TokenEvent& e, const tokenizer::Tokenizer& tokenizer) {
    ui::TokenData t;
    t.id = e.token;
    t.text = QString::fromStdString(e.text);
    t.probability = e.probability;
    t.logprob = e.logprob;
    t.step_ms = e.timings.token_ms;
    for (const auto& c : e.before)
        t.before.push_back({c.id, display_token(tokenizer, c.id), c.probability, c.logit});
    for (const auto& c : e.after)
        t.after.push_back({c.id, display_token(tokenizer, c.id), c.probability, c.logit});
    return t;
}

// How many tokens e's step produced for e's request: the events of one verification share
// its Verification; a plain step produces one.
int tokens_in_step(const std::vector<runtime::TokenEvent>& events, const runtime::TokenEvent& e) {
    if (!e.speculation.verification) return 1;
    int n = 0;
    for (const auto& other : events)
        if (other.token >= 0 && other.speculation.verification == e.speculation.verification) ++n;
    return std::max(1, n);
}
}  // namespace

void register_worker_types() {
    ui::register_panel_types();
    qRegisterMetaType<ChatTurn>();
    qRegisterMetaType<QVector<ChatTurn>>();
    qRegisterMetaType<LoadOptions>();
    ui::register_teaching_types();
    qRegisterMetaType<RemoteSettings>();
}

InferenceWorker::InferenceWorker(QObject* parent)
    : QObject(parent), speculation_(std::make_unique<SpeculationMeter>()) {}
InferenceWorker::~InferenceWorker() = default;

runtime::EngineOptions engine_options(const LoadOptions& options) {
    runtime::EngineOptions o;
    o.threads = options.threads;
    o.kv_capacity_tokens = options.kv_capacity_tokens;
    const auto type = kv::parse_element_type(options.kv_type.toStdString());
    if (!type)
        throw InvalidArgument("KV cache type '" + options.kv_type.toStdString() +
                              "' is not f32, f16 or q8");
    o.kv_type = *type;
    o.device = runtime::parse_device(options.device.toStdString());
    o.speculation = engine_speculation(options.speculation);
    return o;
}

std::unique_ptr<runtime::Engine> InferenceWorker::load_engine(const LoadOptions& options) const {
    return runtime::Engine::load(model_path_.toStdString(), engine_options(options));
}

void InferenceWorker::install_engine(std::unique_ptr<runtime::Engine> engine,
                                     const QString& chat_template) {
    set_remote(nullptr);  // a local model ends remote mode
    prompts_.reset();
    engine_ = std::move(engine);
    prompts_ = std::make_unique<runtime::PromptBuilder>(
        *engine_, chat_template.isEmpty()
                      ? std::nullopt
                      : std::optional<std::string>(chat_template.toStdString()));
    cost_ = inspect::model_cost(engine_->file());
    current_conversation_ = -1;
    labels_.clear();
    pieces_.clear();
    speculation_ = std::make_unique<SpeculationMeter>();  // another engine: other step times
    send_panels(false);
}

void InferenceWorker::setSpeculation(const ui::SpeculationSettings& settings) {
    if (!engine_) {
        options_.speculation = settings;
        emit speculationApplied(settings);
        return;
    }
    if (settings == options_.speculation) {
        emit speculationApplied(settings);
        return;
    }
    try {
        // The same engine with another proposer: cached conversations keep their KV cache, so
        // the next turn still prefills only its new tokens. A draft model loads here.
        engine_->set_speculation(engine_speculation(settings));
        options_.speculation = settings;
    } catch (const std::exception& e) {
        emit speculationFailed(QString::fromUtf8(e.what()));
    }
    emit speculationApplied(options_.speculation);
}

void InferenceWorker::loadModel(const QString& path, const LoadOptions& options) {
    cancel_load_.store(false);
    if (reply_) {
        // A paused step-mode reply ends (as if stopped) before its engine goes away.
        engine_->cancel(current_request_);
        while (engine_->has_work()) engine_->step();
        end_reply();
    }
    try {
        // Read the file through the page cache first, in steps, so loading shows real
        // progress and can be cancelled; the engine then maps pages that are already there.
        emit loadProgress(0, tr("Reading %1").arg(path));
        QFile file(path);
        if (!file.open(QIODevice::ReadOnly))
            throw IoError(path.toStdString() +
                          ": cannot open: " + file.errorString().toStdString());
        const qint64 size = file.size();
        constexpr qint64 kStep = 16 << 20;
        QByteArray buffer;
        for (qint64 done = 0; done < size;) {
            if (cancel_load_.load()) {
                emit loadCancelled();
                return;
            }
            buffer = file.read(kStep);
            if (buffer.isEmpty()) break;
            done += buffer.size();
            emit loadProgress(static_cast<int>(80 * done / std::max<qint64>(1, size)),
                              tr("Reading weights"));
        }
        emit loadProgress(85, tr("Validating and binding tensors"));
        const QString previous_path = model_path_;
        model_path_ = path;
        LoadOptions used = options;
        QString speculation_problem;
        std::unique_ptr<runtime::Engine> engine;
        try {
            engine = load_engine(used);
        } catch (const std::exception& e) {
            if (used.speculation.mode == ui::SpeculationSettings::Mode::Off) {
                model_path_ = previous_path;
                throw;
            }
            // Perhaps only the speculation is at fault (a draft with another vocabulary):
            // the model loads without it, and the user is told why. If the model itself is
            // the problem, this load fails with the model's own message.
            speculation_problem = QString::fromUtf8(e.what());
            used.speculation.mode = ui::SpeculationSettings::Mode::Off;
            try {
                engine = load_engine(used);
            } catch (...) {
                model_path_ = previous_path;
                throw;
            }
        }
        if (cancel_load_.load()) {
            model_path_ = previous_path;
            emit loadCancelled();
            return;
        }
        emit loadProgress(95, tr("Warming up"));
        // Here rather than in the user's first reply, whose first token took 2-4 times as
        // long as later replies' without it (buffers allocated, threads and caches cold).
        engine->warm_up();
        install_engine(std::move(engine), used.chat_template);
        options_ = used;
        emit loadProgress(100, tr("Ready"));
        ui::ModelInfoData info =
            model_info(*engine_, QString::fromStdString(prompts_->description()));
        info.supports_thinking = prompts_->supports_thinking();
        emit modelLoaded(info);
        if (!prompts_->template_problem().empty())
            emit promptNotice(QString::fromStdString(prompts_->template_problem()));
        if (!speculation_problem.isEmpty()) emit speculationFailed(speculation_problem);
        emit speculationApplied(options_.speculation);
    } catch (const std::exception& e) {
        emit loadFailed(QString::fromUtf8(e.what()));
    }
}

void InferenceWorker::forgetConversation(qint64 conversation) {
    if (engine_) engine_->drop_conversation(std::to_string(conversation));
    send_panels(false);
}

void InferenceWorker::generate(qint64 conversation, const QVector<ChatTurn>& turns,
                               const ui::SamplingSettings& settings) {
    if (current_remote()) {
        generate_remote(conversation, turns, settings);
        return;
    }
    if (!begin_reply(conversation, turns, settings, false)) return;
    try {
        while (engine_->has_work()) {
            if (stop_requested_.load()) engine_->cancel(current_request_);
            step_reply();
        }
        end_reply();
    } catch (const std::exception& e) {
        fail_reply(QString::fromUtf8(e.what()));
    }
}

bool InferenceWorker::begin_reply(qint64 conversation, const QVector<ChatTurn>& turns,
                                  const ui::SamplingSettings& settings, bool stepped) {
    if (!engine_ || reply_ || (stepped && current_remote())) {
        emit generationFailed(conversation,
                              stepped && current_remote()
                                  ? tr("Step mode needs a local model: a server streams whole "
                                       "replies.")
                              : engine_ ? tr("Another reply is being generated.")
                                        : tr("No model is loaded."));
        // Every generate() ends with generationFinished: the window leaves its generating state.
        emit generationFinished(conversation, QString(), QStringLiteral("error"), false);
        return false;
    }
    reply_ = std::make_unique<Reply>();
    reply_->conversation = conversation;
    reply_->stepped = stepped;
    reply_->settings = settings;
    try {
        std::vector<tokenizer::ChatMessage> messages;
        for (const auto& t : turns)
            messages.push_back({t.role.toStdString(), t.content.toStdString()});
        if (prompts_->supports_thinking()) prompts_->set_enable_thinking(settings.think);
        std::string template_warning;
        runtime::Request request = prompts_->chat(messages, &template_warning);
        if (!template_warning.empty()) emit promptNotice(QString::fromStdString(template_warning));
        request.sampling.temperature = settings.temperature;
        request.sampling.top_k = settings.top_k;
        request.sampling.top_p = settings.top_p;
        request.sampling.min_p = settings.min_p;
        request.sampling.repeat_penalty = settings.repeat_penalty;
        request.sampling.penalty_window = settings.repeat_window;
        request.sampling.seed = settings.fixed_seed
                                    ? settings.seed
                                    : (static_cast<quint64>(QDateTime::currentMSecsSinceEpoch()) ^
                                       0x9e3779b97f4a7c15ull);
        request.sampling.n_candidates = kCandidates;
        request.max_tokens = settings.max_tokens;
        request.conversation = std::to_string(conversation);
        request.capture.enabled = true;
        request.capture.max_context = kCaptureContext;
        // Step mode shows one token per step: a verification would produce several at once.
        if (stepped) request.speculate = false;

        labels_.clear();
        pieces_.clear();
        for (auto id : request.prompt) add_position(id);
        prompt_tokens_ = static_cast<int>(request.prompt.size());
        current_conversation_ = conversation;
        emit generationStarted(conversation, static_cast<int>(request.prompt.size()));
        current_request_ = engine_->submit(std::move(request));

        reply_->metrics.decode_bytes_per_token = cost_.decode_bytes_per_token;
        speculation_->begin_reply();
        reply_->since_attention.start();
        reply_->since_panels.start();
        return true;
    } catch (const std::exception& e) {
        fail_reply(QString::fromUtf8(e.what()));
        return false;
    }
}

int InferenceWorker::step_reply() {
    Reply& r = *reply_;
    ui::MetricsData& metrics = r.metrics;
    int produced = 0;
    const std::vector<runtime::TokenEvent> events = engine_->step();
    for (const auto& e : events) {
        if (e.token >= 0) {
            // A verification step returns all its tokens at once, with the step's time.
            const int in_step = tokens_in_step(events, e);
            add_position(e.token);
            ui::TokenData token = to_token_data(e, engine_->tokenizer());
            speculation_->annotate(e, in_step, engine_->tokenizer(), token);
            r.text += token.text;
            r.last_token = token;
            ++produced;
            emit tokenGenerated(r.conversation, token);
            metrics.token_ms.push_back(e.timings.token_ms / in_step);
        } else if (!e.text.empty()) {
            // Text released with no token of its own (the end of a reply: held-back text of a
            // possible stop string, a character's last bytes as U+FFFD). The chat shows it as a
            // piece with no token id, so that what is shown is what is saved.
            ui::TokenData tail;
            tail.id = -1;
            tail.text = QString::fromStdString(e.text);
            tail.probability = 1.0f;
            r.text += tail.text;
            emit tokenGenerated(r.conversation, tail);
        }
        metrics.ttft_ms = e.timings.prefill_ms;
        metrics.prompt_tokens = e.timings.prompt_tokens;
        metrics.reused_tokens = e.timings.reused_tokens;
        metrics.prefilled_tokens = e.timings.prefilled_tokens;
        metrics.prefill_tokens_per_s =
            e.timings.prefill_ms > 0
                ? 1000.0 * static_cast<double>(e.timings.prefilled_tokens) / e.timings.prefill_ms
                : 0;
        metrics.decode_tokens_per_s =
            e.timings.decode_ms > 0 && e.timings.generated_tokens > 1
                ? 1000.0 * static_cast<double>(e.timings.generated_tokens - 1) / e.timings.decode_ms
                : 0;
        // Bytes read per decode pass x passes per second. With speculation a pass can
        // produce several tokens: the tokens that came without a pass of their own
        // read no weights.
        speculation_->fill(metrics);
        const double decoded = double(std::max<std::int64_t>(0, e.timings.generated_tokens - 1));
        const double passes_per_s =
            decoded > 0
                ? metrics.decode_tokens_per_s *
                      std::max(0.0, decoded - double(speculation_->tokens_without_pass())) / decoded
                : 0.0;
        metrics.effective_gbps =
            static_cast<double>(cost_.decode_bytes_per_token) * passes_per_s / 1e9;
        if (e.finished) {
            r.reason = QString::fromUtf8(runtime::finish_reason_name(e.reason));
            r.complete = e.reason != runtime::FinishReason::Cancelled;
        }
    }
    if (!r.stepped && r.since_panels.elapsed() >= kPanelIntervalMs) {
        emit metricsChanged(metrics);
        const bool attention_due =
            r.since_attention.elapsed() >= attention_interval_ms(labels_.size());
        send_panels(attention_due);
        if (attention_due) r.since_attention.restart();
        r.since_panels.restart();
    }
    return produced;
}

void InferenceWorker::end_reply() {
    const std::unique_ptr<Reply> r = std::move(reply_);
    stop_requested_.store(false);
    emit metricsChanged(r->metrics);
    send_panels(true);
    emit generationFinished(r->conversation, r->text, r->reason, r->complete);
}

void InferenceWorker::fail_reply(const QString& message) {
    const std::unique_ptr<Reply> r = std::move(reply_);
    stop_requested_.store(false);
    if (engine_ && engine_->has_work()) {
        // Leave no request behind in the engine: the next reply must start alone.
        engine_->cancel(current_request_);
        try {
            while (engine_->has_work()) engine_->step();
        } catch (const std::exception&) {
        }
    }
    const qint64 conversation = r ? r->conversation : current_conversation_;
    emit generationFailed(conversation, message);
    emit generationFinished(conversation, r ? r->text : QString(), "error", false);
}

void InferenceWorker::add_position(std::int32_t token) {
    const tokenizer::Tokenizer& t = engine_->tokenizer();
    labels_ << display_token(t, token);
    // Mid-context: a leading space is text here (at_start would drop a dummy-prefix space).
    const std::string_view bytes = t.token_bytes(token, false);
    pieces_.push_back(QByteArray(bytes.data(), static_cast<qsizetype>(bytes.size())));
}

void InferenceWorker::requestAttention(int layer, int head) {
    attention_layer_ = layer;
    attention_head_ = head;
    if (current_remote()) {
        send_remote_attention(layer, head);
        return;
    }
    if (!engine_) return;
    const inspect::AttentionCapture* capture = engine_->capture(current_request_);
    if (capture)
        emit attentionChanged(
            attention_matrix(*capture, layer, head, labels_, pieces_, prompt_tokens_));
}

void InferenceWorker::send_panels(bool include_attention) {
    if (!engine_) return;
    emit kvChanged(kv_block_map(*engine_));
    emit memoryChanged(memory_budget(*engine_));
    if (include_attention) requestAttention(attention_layer_, attention_head_);
}

}  // namespace tokenscope::app
