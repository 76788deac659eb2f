#include "runtime/speculation/token_info.h"

namespace tokenscope::runtime::speculation {

const char* origin_name(TokenOrigin origin) {
    switch (origin) {
        case TokenOrigin::Plain:
            return "plain";
        case TokenOrigin::Accepted:
            return "accepted";
        case TokenOrigin::Corrected:
            return "corrected";
        case TokenOrigin::Bonus:
            return "bonus";
    }
    return "unknown";
}

}  // namespace tokenscope::runtime::speculation
