#include "panel_data.h"

namespace tokenscope::ui {

// Queued signals carry these types between the worker thread and the GUI thread.
void register_panel_types() {
    qRegisterMetaType<TokenData>();
    qRegisterMetaType<KvBlockMapData>();
    qRegisterMetaType<AttentionData>();
    qRegisterMetaType<MetricsData>();
    qRegisterMetaType<MemoryBudgetData>();
    qRegisterMetaType<ModelInfoData>();
    qRegisterMetaType<SamplingSettings>();
}

}  // namespace tokenscope::ui
