// `tokenscope-cli inspect`: what is in a GGUF file and what it will cost to run.
#include <cstdio>
#include <map>

#include "arguments.h"
#include "commands.h"
#include "gguf/file.h"
#include "inspect/memory_budget.h"
#include "table.h"
#include "util/byte_format.h"
#include "util/error.h"
#include "util/json_writer.h"
#include "util/system_memory.h"

namespace tokenscope::cli {

namespace {

constexpr std::size_t kJsonArrayHead = 16;

void write_json_value(JsonWriter& json, const gguf::Value& value) {
    using gguf::ValueType;
    switch (value.type()) {
        case ValueType::String:
            json.value(value.as_string());
            break;
        case ValueType::Bool:
            json.value(value.as_bool());
            break;
        case ValueType::Float32:
        case ValueType::Float64:
            json.value(value.as_double());
            break;
        case ValueType::Array: {
            // Vocabularies hold hundreds of thousands of entries: give the length and a head.
            const gguf::Array& array = value.as_array();
            json.begin_object();
            json.key("element_type").value(gguf::value_type_name(array.element_type));
            json.key("length").value(static_cast<std::uint64_t>(array.items.size()));
            json.key("head").begin_array();
            for (std::size_t i = 0; i < array.items.size() && i < kJsonArrayHead; ++i) {
                write_json_value(json, array.items[i]);
            }
            json.end_array();
            json.end_object();
            break;
        }
        case ValueType::Int8:
        case ValueType::Int16:
        case ValueType::Int32:
        case ValueType::Int64:
            json.value(value.as_int());
            break;
        default:
            json.value(value.as_uint());
            break;
    }
}

std::string budget_formula(const inspect::MemoryBudget& budget) {
    const auto& kv = *budget.kv;
    char buffer[256];
    if (kv.key_length == kv.value_length) {
        std::snprintf(buffer, sizeof buffer,
                      "2 x %llu layers x %llu kv heads x %llu head dim x %g bytes = %llu bytes",
                      static_cast<unsigned long long>(kv.layers),
                      static_cast<unsigned long long>(kv.kv_heads),
                      static_cast<unsigned long long>(kv.key_length), budget.kv_bytes_per_element,
                      static_cast<unsigned long long>(budget.kv_bytes_per_token()));
    } else {
        std::snprintf(buffer, sizeof buffer,
                      "%llu layers x %llu kv heads x (%llu key + %llu value dims) x %g bytes = "
                      "%llu bytes",
                      static_cast<unsigned long long>(kv.layers),
                      static_cast<unsigned long long>(kv.kv_heads),
                      static_cast<unsigned long long>(kv.key_length),
                      static_cast<unsigned long long>(kv.value_length), budget.kv_bytes_per_element,
                      static_cast<unsigned long long>(budget.kv_bytes_per_token()));
    }
    return buffer;
}

// The RAM the budget is measured against: --ram-gib when given, else the available RAM.
struct RamBudget {
    std::uint64_t available_bytes = 0;  // system_memory::available_bytes()
    std::uint64_t bytes = 0;            // what max_context_for is given
    bool from_option = false;           // bytes came from --ram-gib
};

void print_text(const gguf::File& file, const inspect::MemoryBudget& budget, const RamBudget& ram) {
    std::printf("%s: GGUF v%u, %s (%llu bytes), %zu metadata keys, %zu tensors, alignment %llu\n\n",
                file.path().c_str(), file.version(), human_bytes(file.file_size()).c_str(),
                static_cast<unsigned long long>(file.file_size()), file.metadata().size(),
                file.tensors().size(), static_cast<unsigned long long>(file.alignment()));

    Table metadata({"key", "type", "value"});
    for (const auto& [key, value] : file.metadata()) {
        metadata.add_row(
            {key, gguf::value_type_name(value.type()), printable(value.to_display_string(6), 80)});
    }
    std::printf("Metadata\n%s\n", metadata.render().c_str());

    if (!file.tensors().empty()) {
        Table tensors({"name", "type", "shape", "bytes"}, {false, false, false, true});
        std::map<std::string, std::pair<std::size_t, std::uint64_t>> by_type;
        for (const auto& t : file.tensors()) {
            const char* type = tensor::type_name(t.type);
            tensors.add_row({t.name, type, t.shape_string(), std::to_string(t.byte_size)});
            auto& [count, bytes] = by_type[type];
            ++count;
            bytes += t.byte_size;
        }
        std::printf("Tensors\n%s\n", tensors.render().c_str());
        Table types({"type", "tensors", "bytes"}, {false, true, true});
        for (const auto& [type, entry] : by_type) {
            types.add_row({type, std::to_string(entry.first), human_bytes(entry.second)});
        }
        std::printf("Tensor types\n%s\n", types.render().c_str());
    }

    // Everything measured against RAM is in the binary units of byte_format::binary, the
    // function the desktop app's memory panel uses, so both print the same for the same bytes.
    std::printf("Memory budget\n");
    if (file.tensors().empty()) {
        std::printf("  weights:                  none (this file holds no tensors)\n");
    } else {
        std::printf("  weights:                  %s (%llu bytes)\n",
                    byte_format::binary(budget.weight_bytes).c_str(),
                    static_cast<unsigned long long>(budget.weight_bytes));
    }
    const std::string available_name(byte_format::kAvailableRamName);
    std::printf("  %-25s %s (what new allocations get without swapping)\n",
                (available_name + ":").c_str(), byte_format::binary(ram.available_bytes).c_str());
    if (ram.from_option) {
        std::printf("  RAM budget (--ram-gib):   %s\n", byte_format::binary(ram.bytes).c_str());
    }
    if (!budget.kv) {
        std::printf("  KV cache:                 n/a (no model hyperparameters in this file)\n");
        return;
    }
    std::printf("  KV cache per token (F16): %s\n", budget_formula(budget).c_str());
    if (budget.kv->context_length) {
        std::printf(
            "  KV cache at the full context of %llu tokens: %s\n",
            static_cast<unsigned long long>(budget.kv->context_length),
            byte_format::binary(budget.kv_bytes_per_token() * budget.kv->context_length).c_str());
    }
    const std::uint64_t tokens = budget.max_context_for(ram.bytes);
    std::printf("  longest context in %s%s: %llu tokens%s\n",
                ram.from_option ? "" : (available_name + " of ").c_str(),
                byte_format::binary(ram.bytes).c_str(), static_cast<unsigned long long>(tokens),
                budget.kv->context_length && tokens == budget.kv->context_length
                    ? " (the model's full context)"
                    : "");
}

void print_json(const gguf::File& file, const inspect::MemoryBudget& budget, const RamBudget& ram) {
    const std::uint64_t ram_bytes = ram.bytes;
    JsonWriter json;
    json.begin_object();
    json.key("file").value(file.path());
    json.key("version").value(static_cast<std::uint64_t>(file.version()));
    json.key("file_bytes").value(file.file_size());
    json.key("alignment").value(file.alignment());
    json.key("data_offset").value(file.data_offset());
    json.key("metadata").begin_array();
    for (const auto& [key, value] : file.metadata()) {
        json.begin_object();
        json.key("key").value(key);
        json.key("type").value(gguf::value_type_name(value.type()));
        json.key("value");
        write_json_value(json, value);
        json.end_object();
    }
    json.end_array();
    json.key("tensors").begin_array();
    for (const auto& t : file.tensors()) {
        json.begin_object();
        json.key("name").value(t.name);
        json.key("type").value(tensor::type_name(t.type));
        json.key("shape").begin_array();
        for (auto d : t.dims) json.value(static_cast<std::int64_t>(d));
        json.end_array();
        json.key("bytes").value(t.byte_size);
        json.key("offset").value(t.offset);
        json.end_object();
    }
    json.end_array();
    json.key("budget").begin_object();
    json.key("weight_bytes").value(budget.weight_bytes);
    json.key("ram_bytes").value(ram_bytes);
    json.key("available_ram_bytes").value(ram.available_bytes);
    if (budget.kv) {
        json.key("architecture").value(budget.kv->architecture);
        json.key("layers").value(budget.kv->layers);
        json.key("kv_heads").value(budget.kv->kv_heads);
        json.key("key_length").value(budget.kv->key_length);
        json.key("value_length").value(budget.kv->value_length);
        json.key("context_length").value(budget.kv->context_length);
        json.key("kv_bytes_per_element").value(budget.kv_bytes_per_element);
        json.key("kv_bytes_per_token").value(budget.kv_bytes_per_token());
        json.key("max_context_tokens").value(budget.max_context_for(ram_bytes));
    }
    json.end_object();
    json.end_object();
    std::printf("%s\n", json.str().c_str());
}

}  // namespace

int run_inspect(int argc, char** argv, int first) {
    const Arguments args("inspect", {{"model"}, {"ram-gib"}, {"json", false}}, argc, argv, first);
    const std::string path = args.required("model");
    // One definition of available RAM for the CLI and the app: system_memory::available_bytes()
    // (Linux: MemAvailable), not the installed total, which counts memory other programs hold.
    RamBudget ram;
    ram.available_bytes = system_memory::available_bytes();
    ram.bytes = ram.available_bytes;
    if (auto gib = args.number("ram-gib")) {
        if (*gib <= 0 || *gib > 1e6) {
            throw InvalidArgument(
                "'inspect': option '--ram-gib' must be a positive number of GiB, got '" +
                *args.value("ram-gib") + "'");
        }
        ram.bytes = static_cast<std::uint64_t>(*gib * 1024.0 * 1024.0 * 1024.0);
        ram.from_option = true;
    }
    const gguf::File file = gguf::File::open(path);
    const inspect::MemoryBudget budget = inspect::memory_budget(file);
    if (args.flag("json")) {
        print_json(file, budget, ram);
    } else {
        print_text(file, budget, ram);
    }
    return 0;
}

}  // namespace tokenscope::cli
