#include "hip_stream_event.hpp"

#include <string>
#include <utility>

#include "umem/core/error.hpp"
#include "umem/core/detail/log.hpp"
#include "umem/hip_runtime/hip_compat.hpp"
#include "umem/hip_runtime/hip_device_scope.hpp"

namespace umem::machine {

namespace hc = hip::hip_compat;

hip_stream_event::hip_stream_event(std::shared_ptr<const hip::hip_runtime> rt, int device)
    : rt_(std::move(rt)), device_(device) {
  int count = 0;
  rt_->check(rt_->fn().hipGetDeviceCount(&count), "hipGetDeviceCount");
  if (device < 0 || device >= count)
    throw_error(errc::invalid_argument, "make_stream_event: HIP device " + std::to_string(device) +
                                            " does not exist (" + std::to_string(count) +
                                            " devices, HIP " + rt_->resolved_path() + ")");
  const hip::hip_device_scope scope(*rt_, device_);
  rt_->check(rt_->fn().hipEventCreateWithFlags(&event_, hc::event_flag::disable_timing),
             "hipEventCreateWithFlags");
}

hip_stream_event::~hip_stream_event() {
  const hip::hip_error r = rt_->fn().hipEventDestroy(event_);
  if (r != hc::result::success) log().error("hipEventDestroy failed: {}", rt_->result_text(r));
}

void hip_stream_event::record(void* stream) {
  const hip::hip_device_scope scope(*rt_, device_);
  rt_->check(rt_->fn().hipEventRecord(event_, static_cast<hip::hip_stream>(stream)),
             "hipEventRecord");
}

bool hip_stream_event::query() {
  const hip::hip_error r = rt_->fn().hipEventQuery(event_);
  if (r == hc::result::not_ready) return false;
  rt_->check(r, "hipEventQuery");
  return true;
}

void hip_stream_event::synchronize() {
  rt_->check(rt_->fn().hipEventSynchronize(event_), "hipEventSynchronize");
}

}  // namespace umem::machine
