// Stream-ordered reuse: a point in a GPU stream after which a freed block may be handed out
// again, for the torch bridge's caching allocator (a block freed while a kernel on another stream
// may still read it is reused only once that stream has passed the point).
//
// Implementations (made by gpu_runtime::make_stream_event, gpu_runtime.hpp): CUDA records a
// timing-free cuEvent in the device's primary context; ROCr records a timing-free hipEvent when
// the process has loaded HIP (hip_stream_event.hpp), else has none (make_stream_event throws
// umem::error(unsupported)); "none" is immediate (no GPU can be using the memory).
#pragma once

namespace umem::machine {

class stream_event {
 public:
  virtual ~stream_event() = default;
  // Marks the current end of `stream`, the runtime's native stream handle (CUstream, hipStream_t;
  // null is the legacy default / null stream). Recording again moves the mark. Throws umem::error(runtime_error).
  virtual void record(void* stream) = 0;
  // True once the GPU has passed the mark, or when nothing was recorded. Never blocks. Throws
  // umem::error(runtime_error) when the runtime reports an error (e.g. a failed kernel).
  virtual bool query() = 0;
  // Blocks until query() would answer true. Throws like query().
  virtual void synchronize() = 0;
};

}  // namespace umem::machine
