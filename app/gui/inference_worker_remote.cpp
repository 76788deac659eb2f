// The InferenceWorker's remote mode: the chat streams from a server over the OpenAI API
// (app/remote) on the worker's thread, so the GUI thread stays free exactly as with the local
// engine, and the same signals feed the same panels.
#include <QElapsedTimer>
#include <cmath>

#include <spdlog/spdlog.h>

#include "inference_worker.h"
#include "model_summary.h"
#include "remote_panels.h"
#include "runtime/engine.h"
#include "runtime/prompt_builder.h"

namespace tokenscope::app {

namespace {
constexpr qint64 kMetricsIntervalMs = 100;
// /metrics is scraped over the network while tokens stream (between two tokens, on this
// thread): once a second is plenty for a gauge and costs a far server little.
constexpr qint64 kScrapeIntervalMs = 1000;
constexpr int kTopLogprobs = 20;  // OpenAI's and vLLM's default --max-logprobs limit
}  // namespace

std::shared_ptr<remote::RemoteEngine> InferenceWorker::current_remote() const {
    std::lock_guard lock(remote_mutex_);
    return remote_;
}

void InferenceWorker::set_remote(std::shared_ptr<remote::RemoteEngine> remote) {
    std::lock_guard lock(remote_mutex_);
    remote_ = std::move(remote);
}

void InferenceWorker::stop() {
    stop_requested_.store(true);
    // Closes the socket: a server still prefilling a long prompt sends nothing to notice a
    // flag by, and the reply must end now.
    if (auto remote = current_remote()) remote->cancel();
}

void InferenceWorker::connectRemote(const RemoteSettings& settings) {
    emit loadProgress(0, tr("Connecting to %1").arg(settings.url));
    try {
        remote::RemoteOptions o;
        o.url = settings.url.trimmed().toStdString();
        o.api_key = settings.api_key.toStdString();
        o.model = settings.model.trimmed().toStdString();
        auto engine = std::make_shared<remote::RemoteEngine>(o);
        const remote::ModelEntry model = engine->connect();
        // The server does the work now: the local model's memory goes back to this machine.
        prompts_.reset();
        engine_.reset();
        current_conversation_ = -1;
        labels_.clear();
        pieces_.clear();
        remote_metrics_note_.clear();
        set_remote(engine);
        const QString where = QString::fromStdString(engine->url().origin() + engine->url().prefix);
        spdlog::info("remote: connected to {}; model '{}' loaded there ({})", where.toStdString(),
                     model.id, engine->is_tokenscope() ? "tokenscope-cli serve" : "OpenAI API");
        ui::ModelInfoData info;
        info.remote = true;
        info.remote_internals = engine->is_tokenscope();
        info.path = where;
        info.name = QString::fromStdString(model.id);
        info.backend = tr("remote: %1").arg(where);
        info.chat_template = tr("the server's");
        info.architecture = engine->is_tokenscope() ? tr("tokenscope-cli serve") : tr("OpenAI API");
        info.context_length = model.context_length.value_or(0);
        emit loadProgress(100, tr("Connected"));
        emit modelLoaded(info);
        emit memoryChanged(ui::MemoryBudgetData{});  // this machine holds no weights now
        send_remote_panels();
    } catch (const std::exception& e) {
        emit loadFailed(QString::fromUtf8(e.what()));
    }
}

bool InferenceWorker::send_remote_panels() {
    auto engine = current_remote();
    if (!engine) return false;
    if (engine->is_tokenscope()) {
        if (auto kv = engine->kv_map()) {
            emit kvChanged(remote_kv_from_map(*kv));
            return true;
        }
    }
    std::string why;
    const auto metrics = engine->metrics(&why);
    emit kvChanged(remote_kv_from_metrics(metrics, QString::fromStdString(why)));
    return metrics.has_value();
}

void InferenceWorker::generate_remote(qint64 conversation, const QVector<ChatTurn>& turns,
                                      const ui::SamplingSettings& settings) {
    auto engine = current_remote();
    remote::ChatRequest request;
    for (const auto& t : turns)
        request.messages.push_back({t.role.toStdString(), t.content.toStdString()});
    request.max_tokens = settings.max_tokens;
    request.temperature = settings.temperature;
    request.top_p = settings.top_p;
    request.top_k = settings.top_k;
    request.min_p = settings.min_p;
    if (settings.repeat_penalty != 1.0f) request.repetition_penalty = settings.repeat_penalty;
    if (settings.fixed_seed) request.seed = settings.seed;
    request.top_logprobs = kTopLogprobs;
    const bool ours = engine->is_tokenscope();

    current_conversation_ = conversation;
    labels_.clear();
    pieces_.clear();
    emit generationStarted(conversation, 0);  // the server counts the prompt (usage, at the end)
    QString text;
    ui::MetricsData metrics;
    QElapsedTimer since_metrics;
    since_metrics.start();
    QElapsedTimer since_scrape;
    since_scrape.start();
    bool scrape_pays = true;
    double first_ms = -1.0;
    std::int64_t count = 0;
    try {
        const remote::ChatResult result =
            engine->chat(request, [&](const remote::RemoteToken& token) {
                if (stop_requested_.load()) engine->cancel();
                const ui::TokenData t = remote_token_data(token, ours);
                text += t.text;
                emit tokenGenerated(conversation, t);
                ++count;
                if (first_ms < 0) first_ms = token.since_request_ms;
                metrics.ttft_ms = first_ms;
                metrics.token_ms.push_back(token.token_ms);
                const double decode_ms = token.since_request_ms - first_ms;
                metrics.decode_tokens_per_s =
                    count > 1 && decode_ms > 0 ? 1000.0 * double(count - 1) / decode_ms : 0.0;
                if (since_metrics.elapsed() >= kMetricsIntervalMs) {
                    emit metricsChanged(metrics);
                    since_metrics.restart();
                }
                // A scrape runs on this thread between two tokens: after one that got nothing
                // (no /metrics, a timeout) the stream is not held up by more of them.
                if (scrape_pays && since_scrape.elapsed() >= kScrapeIntervalMs) {
                    scrape_pays = send_remote_panels();
                    since_scrape.restart();
                }
            });
        fill_remote_metrics(result, metrics);
        emit metricsChanged(metrics);
        send_remote_panels();
        remote_reply_id_ = result.id;
        send_remote_attention(attention_layer_, attention_head_);  // our server only
        if (!result.notices.empty()) {
            QStringList notes;
            for (const auto& n : result.notices) notes << QString::fromStdString(n);
            emit promptNotice(notes.join(QStringLiteral("; ")));
        }
        stop_requested_.store(false);
        emit generationFinished(conversation, text, remote_finish_reason(result.finish_reason),
                                !result.cancelled);
    } catch (const std::exception& e) {
        stop_requested_.store(false);
        emit generationFailed(conversation, QString::fromUtf8(e.what()));
        emit generationFinished(conversation, text, QStringLiteral("error"), false);
    }
}

void InferenceWorker::send_remote_attention(int layer, int head) {
    const auto engine = current_remote();
    if (!engine || !engine->is_tokenscope() || remote_reply_id_.empty()) return;
    const std::optional<nlohmann::json> a = engine->attention(remote_reply_id_, layer, head);
    if (!a) return;
    ui::AttentionData d;
    d.layer = layer;
    d.head = head;
    try {
        for (const auto& t : (*a)["tokens"]) {
            // The text the token decodes to, as display_token shows a local one; a byte that is
            // only part of a character (replaced in the JSON) falls back to the piece.
            const QString text = QString::fromStdString(t.value("text", std::string()));
            d.labels << (text.isEmpty() || text.contains(QChar::ReplacementCharacter)
                             ? display_piece(t.value("piece", std::string()))
                             : text);
        }
        for (const auto& row : (*a)["rows"]) {
            QVector<float> r;
            r.reserve(static_cast<qsizetype>(row.size()));
            for (const auto& w : row) r << w.get<float>();
            d.rows << r;
        }
    } catch (const std::exception&) {
        return;  // not the shape our server sends: show nothing rather than half a matrix
    }
    emit attentionChanged(d);
}

}  // namespace tokenscope::app
