#include "model_summary.h"

#include <QStringDecoder>
#include <algorithm>
#include <cmath>
#include <map>

#include "inspect/model_cost.h"
#include "kv/kv_types.h"
#include "util/system_memory.h"

namespace tokenscope::app {

QString display_piece(const std::string& piece) {
    QString text = QString::fromStdString(piece);
    text.replace(QChar(0x2581), QChar(' '));
    return text;
}

QString display_token(const tokenizer::Tokenizer& tokenizer, std::int32_t id) {
    if (id < 0 || id >= tokenizer.vocab_size()) return {};
    if (tokenizer.is_control(id)) return QString::fromStdString(tokenizer.piece(id));
    const std::string_view bytes = tokenizer.token_bytes(id, false);
    QStringDecoder utf8(QStringDecoder::Utf8, QStringDecoder::Flag::Stateless);
    const QString text =
        utf8.decode(QByteArrayView(bytes.data(), static_cast<qsizetype>(bytes.size())));
    if (!utf8.hasError()) return text;
    QString hex;
    for (const char b : bytes)
        hex += QStringLiteral("<0x%1>")
                   .arg(static_cast<unsigned char>(b), 2, 16, QChar('0'))
                   .toUpper()
                   .replace("0X", "0x");
    return hex;
}

std::uint64_t available_ram_bytes() {
    // Linux: MemAvailable, what a new allocation can get without swapping, else the total;
    // Windows: the available physical memory. `tokenscope-cli inspect` reads the same number
    // and calls it by the same name ("available RAM").
    return system_memory::available_bytes();
}

ui::ModelInfoData model_info(const runtime::Engine& engine, const QString& chat_template) {
    const auto& c = engine.config();
    const auto& file = engine.file();
    ui::ModelInfoData info;
    info.path = QString::fromStdString(file.path());
    info.name = QString::fromStdString(c.name);
    info.architecture = QString::fromStdString(c.architecture);
    info.parameters = static_cast<qint64>(inspect::model_cost(file).parameters);
    std::map<std::string, std::pair<int, std::uint64_t>> types;
    for (const auto& t : file.tensors()) {
        auto& [count, bytes] = types[tensor::type_name(t.type)];
        ++count;
        bytes += t.byte_size;
    }
    for (const auto& [name, entry] : types) {
        info.tensor_types << QString("%1: %2 tensors, %3 MB")
                                 .arg(QString::fromStdString(name))
                                 .arg(entry.first)
                                 .arg(static_cast<double>(entry.second) / 1e6, 0, 'f', 1);
    }
    info.context_length = c.context_length;
    info.layers = c.layers;
    info.heads = c.heads;
    info.kv_heads = c.kv_heads;
    info.head_dim = c.head_dim;
    info.embedding_length = c.embedding_length;
    info.vocab_size = c.vocab_size;
    info.tokenizer =
        QString("sentencepiece (%1), %2 tokens")
            .arg(QString::fromStdString(file.optional_string("tokenizer.ggml.model", "?")))
            .arg(engine.tokenizer().vocab_size());
    info.chat_template = chat_template;
    info.backend = QString::fromStdString(engine.backend_name());
    info.weight_bytes = file.tensor_bytes();
    return info;
}

ui::KvBlockMapData kv_block_map(const runtime::Engine& engine) {
    const kv::KvStats s = engine.kv_stats();
    ui::KvBlockMapData d;
    d.block_size = s.block_size;
    d.block_owner.reserve(static_cast<qsizetype>(s.block_owner.size()));
    for (auto owner : s.block_owner) d.block_owner.push_back(owner);
    for (int refs : s.block_refs) d.block_refs.push_back(refs);
    d.tokens_used = s.tokens_stored;
    d.tokens_capacity = static_cast<qint64>(s.blocks_total) * s.block_size;
    d.bytes_used = s.bytes_used;
    d.bytes_total = s.bytes_total;
    const auto& c = engine.config();
    d.layers = static_cast<int>(c.layers);
    d.kv_heads = static_cast<int>(c.kv_heads);
    d.head_dim = static_cast<int>(c.head_dim);
    d.element_type = kv::element_type_name(engine.options().kv_type);
    d.bytes_per_element = kv::element_bytes(engine.options().kv_type);
    d.bytes_per_token = s.bytes_per_token;
    if (s.last_write.seq >= 0) {
        d.last_owner = s.last_write.seq;
        d.last_block = s.last_write.last_block;
        d.last_slot = s.last_write.last_slot;
        d.last_position = s.last_write.first_position;
        d.last_count = s.last_write.count;
    }
    return d;
}

ui::MemoryBudgetData memory_budget(const runtime::Engine& engine) {
    const runtime::BackendMemory m = engine.memory();
    ui::MemoryBudgetData d;
    d.weights_bytes = m.weight_bytes;
    d.kv_cache_bytes = m.kv_cache_bytes;
    d.activation_bytes = m.activation_bytes;
    // The plain number, as the CLI shows it; the view adds back what the CPU backend has
    // already allocated when it draws the bar (MemoryBudgetView::ramCapacity).
    d.available_ram_bytes = available_ram_bytes();
    if (m.device_total_bytes > 0) {
        // The cache and the scratch live on the GPU: RAM holds only the mapped weights.
        d.gpu_total_bytes = m.device_total_bytes;
        d.gpu_used_bytes = m.device_used_bytes;
    }
    return d;
}

ui::AttentionData attention_matrix(const inspect::AttentionCapture& capture, int layer, int head,
                                   const QStringList& labels, const QVector<QByteArray>& pieces,
                                   int prompt_tokens) {
    ui::AttentionData d;
    d.layer = layer;
    d.head = head;
    const qint64 rows = std::min<qint64>(capture.rows(), labels.size());
    d.labels = labels.mid(0, static_cast<qsizetype>(rows));
    if (pieces.size() >= rows) d.pieces = pieces.mid(0, static_cast<qsizetype>(rows));
    d.prompt_tokens = prompt_tokens;
    d.rows.reserve(static_cast<qsizetype>(rows));
    for (qint64 q = 0; q < rows; ++q) {
        const std::vector<float> row =
            head < 0 ? capture.mean_row(layer, q) : capture.row(layer, head, q);
        d.rows.push_back(QVector<float>(row.begin(), row.end()));
    }
    return d;
}

ui::HeadOverviewData HeadStatistics::update(const inspect::AttentionCapture& capture, int layers,
                                            int heads, qint64 rows, qint64 owner) {
    const qint64 first = rows > 4 ? 2 : 0;
    const std::size_t cells = std::size_t(std::max(0, layers)) * std::size_t(std::max(0, heads));
    if (&capture != capture_ || owner != owner_ || rows < done_ || first != first_ ||
        entropy_.size() != cells) {
        capture_ = &capture;
        owner_ = owner;
        first_ = first;
        done_ = first;
        entropy_.assign(cells, 0.0);
        distance_.assign(cells, 0.0);
    }
    for (int l = 0; l < layers; ++l) {
        for (int h = 0; h < heads; ++h) {
            if (!capture.wants(l, h)) continue;
            double& entropy = entropy_[std::size_t(l) * std::size_t(heads) + std::size_t(h)];
            double& distance = distance_[std::size_t(l) * std::size_t(heads) + std::size_t(h)];
            for (qint64 q = done_; q < rows; ++q) {
                const std::vector<float> row = capture.row(l, h, q);
                for (std::size_t k = 0; k < row.size(); ++k) {
                    const double w = row[k];
                    if (w > 0) entropy -= w * std::log2(w);
                    distance += w * double(q - qint64(k));
                }
            }
        }
    }
    done_ = std::max(done_, rows);
    ui::HeadOverviewData d;
    d.layers = layers;
    d.heads = heads;
    d.rows = int(rows);
    d.entropy.resize(qsizetype(cells));
    d.distance.resize(qsizetype(cells));
    const double count = double(std::max<qint64>(1, rows - first));
    for (std::size_t i = 0; i < cells; ++i) {
        d.entropy[qsizetype(i)] = float(entropy_[i] / count);
        d.distance[qsizetype(i)] = float(distance_[i] / count);
    }
    return d;
}

}  // namespace tokenscope::app
