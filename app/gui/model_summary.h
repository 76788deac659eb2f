#pragma once
// Turns engine state into the plain panel data of ui/panel_data.h (model info, KV block map,
// memory budget, attention matrix). Runs on the worker thread; the results travel to the GUI
// by queued signals.
#include <QStringList>
#include <vector>

#include "panel_data.h"
#include "runtime/engine.h"
#include "teaching_data.h"

namespace tokenscope::app {

ui::ModelInfoData model_info(const runtime::Engine& engine, const QString& chat_template);
ui::KvBlockMapData kv_block_map(const runtime::Engine& engine);
ui::MemoryBudgetData memory_budget(const runtime::Engine& engine);
// Rows [0, rows) of one layer and head (head -1: the mean over heads) with token labels and,
// when given, each token's bytes (ui::AttentionData::pieces).
ui::AttentionData attention_matrix(const inspect::AttentionCapture& capture, int layer, int head,
                                   const QStringList& labels,
                                   const QVector<QByteArray>& pieces = {}, int prompt_tokens = -1);
// Entropy and mean look-back distance of every layer x head (the Heads overview), kept as
// running sums over the capture's rows. Captured rows do not change while one request runs
// (a speculative rollback drops only rows past the accepted tokens, which were never summed:
// the worker asks between steps), so each update within a request adds only the rows since
// the last one: step mode asks after every token, and a whole pass over layers x heads x n^2
// weights took about 0.2 s at 560 tokens for SmolLM2. A new request starts over (its turn may
// have rewritten rows after the part of the conversation it reused).
class HeadStatistics {
  public:
    // The overview of rows [first, rows) of `capture` (first = 2 when there are more than 4
    // rows: rows 0 and 1 have at most two keys). `owner` names what the rows belong to (a
    // request id): another owner or capture, fewer rows than summed, or another first row
    // starts the sums over.
    ui::HeadOverviewData update(const inspect::AttentionCapture& capture, int layers, int heads,
                                qint64 rows, qint64 owner);

  private:
    const inspect::AttentionCapture* capture_ = nullptr;
    qint64 owner_ = -1;
    qint64 first_ = 0;
    qint64 done_ = 0;  // rows [first_, done_) are in the sums
    std::vector<double> entropy_, distance_;
};

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
