#pragma once
// The panels' data from a remote server (app/remote) instead of the local engine: a streamed
// token as the Token panel's TokenData, the server's KV cache as the KV panel's data (our
// server's block map, or another server's /metrics usage gauge, or a note saying what it does
// not expose), the reply's timing as MetricsData.
#include "panel_data.h"
#include "remote_engine.h"

namespace tokenscope::app {

ui::TokenData remote_token_data(const remote::RemoteToken& token, bool from_tokenscope);

// Our server's /tokenscope/v1/kv as the block map the local engine gives.
ui::KvBlockMapData remote_kv_from_map(const nlohmann::json& kv);
// Another server: its usage gauge when /metrics has one; `why_not` when it has none.
ui::KvBlockMapData remote_kv_from_metrics(const std::optional<remote::ServerMetrics>& metrics,
                                          const QString& why_not);

// Timing measured here (TTFT, tok/s, per-token gaps) and, from our server, its own prefill.
void fill_remote_metrics(const remote::ChatResult& result, ui::MetricsData& metrics);

// The server's finish_reason as the names the chat's reply note knows ("max_tokens", ...).
QString remote_finish_reason(const std::string& reason);

}  // namespace tokenscope::app
