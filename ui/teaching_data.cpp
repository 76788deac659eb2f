#include "teaching_data.h"

namespace tokenscope::ui {

void register_teaching_types() {
    qRegisterMetaType<HeadGridData>();
    qRegisterMetaType<StepData>();
    qRegisterMetaType<HeadOverviewData>();
}

}  // namespace tokenscope::ui
