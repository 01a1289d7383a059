#include "real_hip.hpp"

#include <dlfcn.h>

#include <array>
#include <span>
#include <vector>

#include "umem/core/shared_library.hpp"

namespace umem::hw_test {
namespace {

// The first of `names` that dlopen(flags) maps, with its table filled; else every refusal.
template <class Functions, class Fill>
map_result<Functions> map_first(std::span<const char* const> names, int flags, const char* what,
                                Fill fill) {
  map_result<Functions> out;
  for (const char* name : names) {
    dlerror();  // clear a stale message
    void* handle = dlopen(name, flags);
    if (handle == nullptr) {
      // dlerror names the file itself ("NAME: cannot open shared object file: ...").
      const char* why = dlerror();
      const std::string text = why != nullptr ? why : "not found";
      out.absent += "\n  " + (text.starts_with(name) ? text : name + (": " + text));
      continue;
    }
    mapped_runtime<Functions> rt;
    rt.library = mapped_path_of(handle, name);
    fill(handle, rt.library, rt.fn);  // throws naming a missing symbol
    out.runtime = std::move(rt);
    return out;
  }
  out.absent = std::string(what) + " could not be loaded; tried:" + out.absent;
  return out;
}

constexpr const char* kHint = "the hardware tier needs a complete ROCm installation";

}  // namespace

const char* to_string(memcpy_kind k) {
  switch (k) {
    case memcpy_kind::host_to_host: return "hipMemcpyHostToHost";
    case memcpy_kind::host_to_device: return "hipMemcpyHostToDevice";
    case memcpy_kind::device_to_host: return "hipMemcpyDeviceToHost";
    case memcpy_kind::device_to_device: return "hipMemcpyDeviceToDevice";
    case memcpy_kind::by_pointer: return "hipMemcpyDefault";
  }
  return "hipMemcpyKind?";
}

// One table slot filled from `handle`; a missing symbol throws naming it and the library.
#define UMEM_HW_TEST_RESOLVE(symbol, result, params) \
  resolve_symbol(handle, {#symbol, symbol_need::required}, fn.symbol, what, path, kHint);

map_result<hip_functions> map_hip() {
  static constexpr std::array<const char*, 3> names{"libamdhip64.so", "libamdhip64.so.7",
                                                    "libamdhip64.so.6"};
  return map_first<hip_functions>(
      names, RTLD_NOW | RTLD_GLOBAL, "the HIP runtime (libamdhip64)",
      [](void* handle, const std::string& path, hip_functions& fn) {
        const std::string what = "the HIP runtime";
        UMEM_HW_TEST_HIP_SYMBOLS(UMEM_HW_TEST_RESOLVE)
      });
}

map_result<hiprtc_functions> map_hiprtc() {
  static constexpr std::array<const char*, 3> names{"libhiprtc.so", "libhiprtc.so.7",
                                                    "libhiprtc.so.6"};
  return map_first<hiprtc_functions>(
      names, RTLD_NOW | RTLD_LOCAL, "HIP's run-time compiler (libhiprtc)",
      [](void* handle, const std::string& path, hiprtc_functions& fn) {
        const std::string what = "hiprtc";
        UMEM_HW_TEST_HIPRTC_SYMBOLS(UMEM_HW_TEST_RESOLVE)
      });
}
#undef UMEM_HW_TEST_RESOLVE

std::string hip_error_text(const hip_functions& fn, hip_error e) {
  const char* name = fn.hipGetErrorName(e);
  const char* text = fn.hipGetErrorString(e);
  std::string out = name != nullptr ? name : "hipError " + std::to_string(e);
  if (text != nullptr) out += std::string(" (") + text + ")";
  return out;
}

namespace {

// hiprtc's answer for one set of options: the code object, or the failure and the program log.
compiled_kernel compile_with(const hiprtc_functions& rtc, const std::string& source,
                             std::vector<const char*> options, std::string how) {
  compiled_kernel out;
  out.how = std::move(how);
  const auto failed = [&](const char* call, hiprtc_result r) {
    const char* text = rtc.hiprtcGetErrorString(r);
    out.failure = std::string(call) + " failed: " + (text != nullptr ? text : "?") + " (" +
                  std::to_string(r) + ")";
  };
  hiprtc_program prog = nullptr;
  if (hiprtc_result r = rtc.hiprtcCreateProgram(&prog, source.c_str(), "umem_hardware_kernel.hip",
                                                0, nullptr, nullptr);
      r != 0) {
    failed("hiprtcCreateProgram", r);
    return out;
  }
  if (hiprtc_result r = rtc.hiprtcCompileProgram(prog, static_cast<int>(options.size()),
                                                 options.empty() ? nullptr : options.data());
      r != 0) {
    failed("hiprtcCompileProgram", r);
    std::size_t log_size = 0;
    if (rtc.hiprtcGetProgramLogSize(prog, &log_size) == 0 && log_size > 1) {
      std::string log(log_size, '\0');
      if (rtc.hiprtcGetProgramLog(prog, log.data()) == 0) out.failure += "; log:\n" + log;
    }
  } else {
    std::size_t size = 0;
    if (hiprtc_result g = rtc.hiprtcGetCodeSize(prog, &size); g != 0) {
      failed("hiprtcGetCodeSize", g);
    } else {
      out.code.assign(size, '\0');
      if (hiprtc_result c = rtc.hiprtcGetCode(prog, out.code.data()); c != 0) {
        failed("hiprtcGetCode", c);
        out.code.clear();
      }
    }
  }
  rtc.hiprtcDestroyProgram(&prog);
  return out;
}

}  // namespace

compiled_kernel compile_kernel(const hiprtc_functions& rtc, const std::string& source,
                               const std::string& fallback_target) {
  compiled_kernel first = compile_with(rtc, source, {}, "hiprtc's default target");
  if (!first.code.empty() || fallback_target.empty()) return first;
  const std::string arch = "--offload-arch=" + fallback_target;
  compiled_kernel second = compile_with(rtc, source, {arch.c_str()}, arch);
  if (second.code.empty())
    second.failure = "with " + first.how + ": " + first.failure + "\nwith " + arch + ": " +
                     second.failure;
  return second;
}

}  // namespace umem::hw_test
