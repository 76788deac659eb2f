#include "quant/imatrix.h"

#include <cstring>
#include <fstream>

#include "gguf/file.h"
#include "gguf/writer.h"
#include "util/error.h"

namespace tokenscope::quant {

namespace {

constexpr const char* kSums = ".in_sum2";
constexpr const char* kCounts = ".counts";

bool strip_suffix(std::string& name, const std::string& suffix) {
    if (name.size() <= suffix.size() ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
        return false;
    name.resize(name.size() - suffix.size());
    return true;
}

std::vector<float> f32_values(const gguf::TensorInfo& t, const std::string& path) {
    if (t.type != tensor::Type::F32)
        throw FormatError(path + ": imatrix tensor '" + t.name + "' is not F32");
    std::vector<float> v(static_cast<std::size_t>(t.element_count));
    std::memcpy(v.data(), t.data, v.size() * sizeof(float));
    return v;
}

// llama.cpp's legacy imatrix.dat: int32 n_entries; per entry int32 name length, name, int32
// ncall, int32 nval, nval floats (mean * ncall); then optionally int32 chunk count, int32 length
// and the dataset name.
Imatrix load_legacy(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw IoError(path + ": cannot open");
    auto read_i32 = [&](const char* what) {
        std::int32_t v = 0;
        in.read(reinterpret_cast<char*>(&v), sizeof v);
        if (!in)
            throw FormatError(path +
                              ": neither a GGUF imatrix nor a legacy imatrix.dat (truncated at " +
                              what + ")");
        return v;
    };
    Imatrix m;
    const std::int32_t n = read_i32("the entry count");
    if (n < 1 || n > 1000000)
        throw FormatError(path + ": neither a GGUF imatrix nor a legacy imatrix.dat (entry count " +
                          std::to_string(n) + ")");
    for (std::int32_t i = 0; i < n; ++i) {
        const std::int32_t len = read_i32("a name length");
        if (len < 1 || len > 4096)
            throw FormatError(path + ": legacy imatrix entry " + std::to_string(i) +
                              ": bad name length");
        std::string name(static_cast<std::size_t>(len), '\0');
        in.read(name.data(), len);
        const std::int32_t ncall = read_i32("a call count");
        const std::int32_t nval = read_i32("a value count");
        if (nval < 1 || nval > (1 << 24))
            throw FormatError(path + ": legacy imatrix entry '" + name + "': bad value count");
        ImatrixEntry e;
        e.sums.resize(static_cast<std::size_t>(nval));
        in.read(reinterpret_cast<char*>(e.sums.data()),
                static_cast<std::streamsize>(nval * sizeof(float)));
        if (!in) throw FormatError(path + ": legacy imatrix entry '" + name + "' is truncated");
        e.count = ncall;  // values are mean * ncall, so sums / count is the mean
        m.entries[name] = std::move(e);
    }
    std::int32_t chunks = 0;
    if (in.read(reinterpret_cast<char*>(&chunks), sizeof chunks)) {
        m.chunk_count = static_cast<std::uint32_t>(std::max(0, chunks));
        std::int32_t len = 0;
        if (in.read(reinterpret_cast<char*>(&len), sizeof len) && len > 0 && len < 65536) {
            std::string dataset(static_cast<std::size_t>(len), '\0');
            if (in.read(dataset.data(), len)) m.datasets.push_back(dataset);
        }
    }
    return m;
}

}  // namespace

std::vector<float> Imatrix::mean(const std::string& name) const {
    auto it = entries.find(name);
    if (it == entries.end()) return {};
    std::vector<float> v(it->second.sums.size(), 1.0f);
    if (it->second.count > 0) {
        for (std::size_t j = 0; j < v.size(); ++j)
            v[j] = static_cast<float>(it->second.sums[j] / it->second.count);
    }
    return v;
}

void save_imatrix(const Imatrix& imatrix, const std::string& path) {
    gguf::Writer w;
    w.set("general.type", gguf::Value::string("imatrix"));
    w.set("imatrix.datasets", gguf::Value::strings(imatrix.datasets));
    w.set("imatrix.chunk_count", gguf::Value::u32(imatrix.chunk_count));
    w.set("imatrix.chunk_size", gguf::Value::u32(imatrix.chunk_size));
    for (const auto& [name, e] : imatrix.entries) {
        const auto cols = static_cast<std::int64_t>(e.sums.size());
        w.add_tensor(
            name + kSums, tensor::Type::F32, {cols, 1},
            {reinterpret_cast<const std::uint8_t*>(e.sums.data()), e.sums.size() * sizeof(float)});
        const float count = static_cast<float>(e.count);
        w.add_tensor(name + kCounts, tensor::Type::F32, {1, 1},
                     {reinterpret_cast<const std::uint8_t*>(&count), sizeof count});
    }
    w.write_streamed(path, {});
}

Imatrix load_imatrix(const std::string& path) {
    {
        std::ifstream probe(path, std::ios::binary);
        if (!probe) throw IoError(path + ": cannot open");
        std::uint32_t magic = 0;
        probe.read(reinterpret_cast<char*>(&magic), sizeof magic);
        if (!probe || magic != gguf::kMagic) return load_legacy(path);
    }
    const gguf::File file = gguf::File::open(path);
    Imatrix m;
    if (const gguf::Value* d = file.find("imatrix.datasets");
        d && d->type() == gguf::ValueType::Array) {
        for (const gguf::Value& item : d->as_array().items) {
            if (item.type() == gguf::ValueType::String) m.datasets.push_back(item.as_string());
        }
    }
    m.chunk_count = static_cast<std::uint32_t>(file.optional_uint("imatrix.chunk_count", 0));
    m.chunk_size = static_cast<std::uint32_t>(file.optional_uint("imatrix.chunk_size", 0));
    std::map<std::string, std::pair<const gguf::TensorInfo*, const gguf::TensorInfo*>> found;
    for (const gguf::TensorInfo& t : file.tensors()) {
        std::string name = t.name;
        if (strip_suffix(name, kSums))
            found[name].first = &t;
        else if (strip_suffix(name, kCounts))
            found[name].second = &t;
    }
    if (found.empty())
        throw FormatError(path +
                          ": a GGUF file without imatrix tensors (NAME.in_sum2 / NAME.counts)");
    for (const auto& [name, pair] : found) {
        if (!pair.first || !pair.second)
            throw FormatError(path + ": imatrix entry '" + name + "' lacks its " +
                              (pair.first ? "counts" : "in_sum2") + " tensor");
        ImatrixEntry e;
        e.sums = f32_values(*pair.first, path);
        const std::vector<float> counts = f32_values(*pair.second, path);
        if (counts.size() != 1) {
            throw FormatError(path + ": imatrix entry '" + name + "' has " +
                              std::to_string(counts.size()) +
                              " counts (expert matrices are not supported)");
        }
        e.count = counts[0];
        m.entries[name] = std::move(e);
    }
    return m;
}

void check_imatrix_fits(const Imatrix& imatrix, const std::string& imatrix_path,
                        const gguf::File& model) {
    std::size_t matched = 0;
    for (const auto& [name, e] : imatrix.entries) {
        const gguf::TensorInfo* t = model.find_tensor(name);
        if (!t || t->dims.size() < 2) {
            throw InvalidArgument(
                "imatrix " + imatrix_path + " does not belong to " + model.path() +
                ": it has an entry for '" + name +
                "', which the model has no matrix of (an imatrix from another model?)");
        }
        if (static_cast<std::int64_t>(e.sums.size()) != t->dims[0]) {
            throw InvalidArgument("imatrix " + imatrix_path + " does not belong to " +
                                  model.path() + ": its entry '" + name + "' has " +
                                  std::to_string(e.sums.size()) + " columns, the model's tensor " +
                                  std::to_string(t->dims[0]) + " (an imatrix from another model?)");
        }
        ++matched;
    }
    if (matched == 0) throw InvalidArgument("imatrix " + imatrix_path + " has no entries");
}

ImatrixCollector::ImatrixCollector(const gguf::File& model) : model_(model) {}

std::string ImatrixCollector::name_of(int layer, runtime::MatmulSite site) const {
    using runtime::MatmulSite;
    if (site == MatmulSite::Output)
        return model_.find_tensor("output.weight") ? "output.weight" : "";
    const std::string p = "blk." + std::to_string(layer) + ".";
    const bool fused_qkv = model_.find_tensor(p + "attn_qkv.weight") != nullptr;
    const bool fused_up = model_.find_tensor(p + "ffn_gate.weight") == nullptr;
    switch (site) {
        case MatmulSite::AttnQ:
            return fused_qkv ? p + "attn_qkv.weight" : p + "attn_q.weight";
        case MatmulSite::AttnK:
            return fused_qkv ? "" : p + "attn_k.weight";
        case MatmulSite::AttnV:
            return fused_qkv ? "" : p + "attn_v.weight";
        case MatmulSite::AttnOutput:
            return p + "attn_output.weight";
        case MatmulSite::FfnGate:
            return fused_up ? "" : p + "ffn_gate.weight";
        case MatmulSite::FfnUp:
            return p + "ffn_up.weight";
        case MatmulSite::FfnDown:
            return p + "ffn_down.weight";
        case MatmulSite::Output:
            break;
    }
    return "";
}

void ImatrixCollector::on_matmul(int layer, runtime::MatmulSite site, const model::WeightMatrix& w,
                                 const float* x, std::int64_t tokens) {
    const auto key = std::make_pair(layer, static_cast<int>(site));
    auto it = slots_.find(key);
    if (it == slots_.end()) {
        const std::string name = name_of(layer, site);
        ImatrixEntry* entry = nullptr;
        if (!name.empty()) {
            entry = &imatrix_.entries[name];
            entry->sums.assign(static_cast<std::size_t>(w.cols), 0.0f);
        }
        it = slots_.emplace(key, entry).first;
    }
    ImatrixEntry* e = it->second;
    if (!e) return;
    // Accumulate in double per call, then add: float sums over thousands of tokens lose bits.
    thread_local std::vector<double> acc;
    acc.assign(static_cast<std::size_t>(w.cols), 0.0);
    for (std::int64_t t = 0; t < tokens; ++t) {
        const float* row = x + t * w.cols;
        for (std::int64_t j = 0; j < w.cols; ++j)
            acc[static_cast<std::size_t>(j)] += static_cast<double>(row[j]) * row[j];
    }
    for (std::size_t j = 0; j < acc.size(); ++j) e->sums[j] += static_cast<float>(acc[j]);
    e->count += static_cast<double>(tokens);
}

}  // namespace tokenscope::quant
