#include "util/error.h"

#include <system_error>

namespace tokenscope {

std::string system_error_text(int errnum) {
    return std::generic_category().message(errnum);
}

}  // namespace tokenscope
