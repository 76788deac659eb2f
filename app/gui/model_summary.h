#pragma once
// Turns engine state into the plain panel data of ui/panel_data.h (model info, KV block map,
// memory budget, attention matrix). Runs on the worker thread; the results travel to the GUI
// by queued signals.
#include <QStringList>

#include "panel_data.h"
#include "runtime/engine.h"

namespace tokenscope::app {

ui::ModelInfoData model_info(const runtime::Engine& engine, const QString& chat_template);
ui::KvBlockMapData kv_block_map(const runtime::Engine& engine);
ui::MemoryBudgetData memory_budget(const runtime::Engine& engine);
// Rows [0, rows) of one layer and head (head -1: the mean over heads) with token labels and,
// when given, each token's bytes (ui::AttentionData::pieces).
ui::AttentionData attention_matrix(const inspect::AttentionCapture& capture, int layer, int head,
                                   const QStringList& labels,
                                   const QVector<QByteArray>& pieces = {}, int prompt_tokens = -1);
// The token as the UI shows it: "▁" as a space, control pieces kept, bytes as <0xNN>.
QString display_piece(const std::string& piece);
// What a token looks like in text, for labels and candidate lists: the text it decodes to
// (SentencePiece's "▁" and byte-level BPE's "Ġ"/"Ċ" as the space and newline they stand for);
// a control token as its piece ("<|im_end|>"); a byte that is only part of a UTF-8 character
// as "<0xE4>".
QString display_token(const tokenizer::Tokenizer& tokenizer, std::int32_t id);
// system_memory::available_bytes(): "available RAM", the same quantity the CLI prints.
std::uint64_t available_ram_bytes();

}  // namespace tokenscope::app
