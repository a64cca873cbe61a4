#include "common/clock.h"

namespace mb {

const Clock& DefaultClock() noexcept {
  static const SystemClock clock;
  return clock;
}

}  // namespace mb
