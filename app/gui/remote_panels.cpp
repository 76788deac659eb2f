#include "remote_panels.h"

#include <QCoreApplication>
#include <cmath>
#include <limits>

namespace tokenscope::app {

namespace {
QString tr(const char* text) {
    return QCoreApplication::translate("RemotePanels", text);
}

float logit_or_nan(const std::optional<double>& logit) {
    return logit ? static_cast<float>(*logit) : std::numeric_limits<float>::quiet_NaN();
}
}  // namespace

ui::TokenData remote_token_data(const remote::RemoteToken& token, bool from_tokenscope) {
    ui::TokenData t;
    t.id = token.id;
    t.text = QString::fromStdString(token.text);
    t.logprob = static_cast<float>(token.logprob.value_or(0.0));
    t.probability = static_cast<float>(
        token.probability.value_or(token.logprob ? std::exp(*token.logprob) : 0.0));
    t.step_ms = token.token_ms;
    for (const auto& c : token.top) {
        // OpenAI's top_logprobs name tokens by text only: the chosen one is marked by the same
        // id as the token (-1), the others get -2, so the inspector highlights the right row.
        const int id = c.id >= 0 ? c.id : (c.text == token.token ? t.id : -2);
        t.before.push_back({id, QString::fromStdString(c.text), static_cast<float>(c.probability),
                            logit_or_nan(c.logit)});
    }
    for (const auto& c : token.after)
        t.after.push_back({c.id, QString::fromStdString(c.text), static_cast<float>(c.probability),
                           logit_or_nan(c.logit)});
    // Our server sends the local sampler's own two lists: the panel reads them as it does locally.
    if (!from_tokenscope)
        t.source = token.has_logprobs ? tr("the server's top_logprobs")
                                      : tr("nothing: this server gives no logprobs");
    return t;
}

ui::KvBlockMapData remote_kv_from_map(const nlohmann::json& kv) {
    ui::KvBlockMapData d;
    auto integer = [&](const char* key) {
        return kv.contains(key) && kv[key].is_number() ? kv[key].get<qint64>() : qint64{0};
    };
    d.block_size = static_cast<int>(integer("block_size"));
    if (kv.contains("block_owner") && kv["block_owner"].is_array())
        for (const auto& o : kv["block_owner"]) d.block_owner.push_back(o.get<qint64>());
    if (kv.contains("block_refs") && kv["block_refs"].is_array())
        for (const auto& r : kv["block_refs"]) d.block_refs.push_back(r.get<int>());
    d.tokens_used = integer("tokens_stored");
    d.tokens_capacity = integer("blocks_total") * d.block_size;
    d.bytes_used = static_cast<quint64>(integer("bytes_used"));
    d.bytes_total = static_cast<quint64>(integer("bytes_total"));
    d.bytes_per_token = static_cast<quint64>(integer("bytes_per_token"));
    d.remote_note = tr("The server's own block map (tokenscope-cli serve, /tokenscope/v1/kv): "
                       "%1 requests generating, %2 waiting; %3 B per token.")
                        .arg(integer("requests_running"))
                        .arg(integer("requests_waiting"))
                        .arg(d.bytes_per_token);
    return d;
}

ui::KvBlockMapData remote_kv_from_metrics(const std::optional<remote::ServerMetrics>& metrics,
                                          const QString& why_not) {
    ui::KvBlockMapData d;
    const QString hidden =
        tr(" The block map, bytes per token and element type are internals "
           "this server does not expose.");
    if (!metrics) {
        d.remote_note = tr("The server's KV cache is not visible: %1.").arg(why_not) + hidden;
        return d;
    }
    if (metrics->kv_usage) d.usage_ratio = *metrics->kv_usage;
    QStringList parts;
    if (metrics->requests_running)
        parts << tr("%1 requests running").arg(*metrics->requests_running);
    if (metrics->requests_waiting) parts << tr("%1 waiting").arg(*metrics->requests_waiting);
    const QString engine = QString::fromStdString(metrics->engine);
    d.remote_note =
        (metrics->kv_usage ? tr("From %1's /metrics").arg(engine)
                           : tr("%1's /metrics has no KV cache usage gauge").arg(engine)) +
        (parts.isEmpty() ? QString() : QStringLiteral(": ") + parts.join(", ")) +
        QStringLiteral(".") + hidden;
    return d;
}

void fill_remote_metrics(const remote::ChatResult& result, ui::MetricsData& metrics) {
    metrics.ttft_ms = result.ttft_ms;
    metrics.decode_tokens_per_s = result.tokens_per_s();
    if (result.prompt_tokens) metrics.prompt_tokens = *result.prompt_tokens;
    if (const auto& s = result.server_timings) {
        metrics.prompt_tokens = s->prompt_tokens;
        metrics.reused_tokens = s->reused_tokens;
        metrics.prefilled_tokens = s->prompt_tokens - s->reused_tokens;
        metrics.prefill_tokens_per_s =
            s->prefill_ms > 0 ? 1000.0 * double(metrics.prefilled_tokens) / s->prefill_ms : 0.0;
    }
}

QString remote_finish_reason(const std::string& reason) {
    if (reason == "length") return QStringLiteral("max_tokens");
    if (reason.empty()) return QStringLiteral("stop");
    return QString::fromStdString(reason);
}

}  // namespace tokenscope::app
