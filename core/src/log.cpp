#include "umem/core/detail/log.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>

#include "umem/core/options.hpp"

namespace umem {

spdlog::logger& log() {
  static const std::shared_ptr<spdlog::logger> logger = [] {
    // A second copy of umem_core in the process (e.g. the ROCr test double) shares spdlog's
    // registry; reuse its logger instead of failing to register the name twice.
    if (auto existing = spdlog::get("umem")) return existing;
    auto l = spdlog::stderr_color_mt("umem");
    l->set_pattern("[umem %l] %v");
    auto level = spdlog::level::warn;
    if (auto v = env_value("UMEM_LOG_LEVEL")) {
      level = spdlog::level::from_str(*v);
      // from_str maps unknown names to "off"; say so rather than going silent.
      if (level == spdlog::level::off && *v != "off") {
        level = spdlog::level::warn;
        l->warn("UMEM_LOG_LEVEL='{}' is not a level (trace, debug, info, warn, error, critical, "
                "off); using warn",
                *v);
      }
    }
    l->set_level(level);
    return l;
  }();
  return *logger;
}

}  // namespace umem
