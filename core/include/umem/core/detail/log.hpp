// Logging: spdlog, quiet by default (warnings and errors only); UMEM_LOG_LEVEL raises it
// (trace, debug, info, warn, error, critical, off). The logger is created once on first use.
#pragma once

#include <spdlog/spdlog.h>

namespace umem {

spdlog::logger& log();

}  // namespace umem
