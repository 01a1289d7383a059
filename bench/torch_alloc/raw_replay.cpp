// A trace replayed from C++ through whatever CUDA allocator PyTorch has now (c10's
// CUDACachingAllocator interface, raw_alloc_with_stream / raw_delete: what PyTorch's own C++
// calls), each call timed alone with steady_clock. Built by trace_replay.py with
// torch.utils.cpp_extension into the process that runs it, so it shares that process's PyTorch
// and reaches umem when umem.torch.enable() ran first. Nothing of umem is compiled in.
#include <c10/cuda/CUDACachingAllocator.h>
#include <cuda_runtime_api.h>
#include <torch/extension.h>

#include <chrono>
#include <cstdint>
#include <vector>

namespace {

namespace cca = c10::cuda::CUDACachingAllocator;
using clock_type = std::chrono::steady_clock;

// events: int64 [n, 4] rows (op 0 alloc / 1 free, id, bytes, stream index); `streams`: the
// cudaStream_t of each stream index. Replays `passes` times (frees what a pass leaves, then
// synchronizes); returns the nanoseconds of each event of the last pass.
torch::Tensor replay(const torch::Tensor& events, const std::vector<std::int64_t>& streams,
                     std::int64_t ids, std::int64_t passes) {
  TORCH_CHECK(events.dim() == 2 && events.size(1) == 4 && events.scalar_type() == torch::kInt64,
              "replay: events must be an int64 tensor of shape [n, 4]");
  TORCH_CHECK(passes >= 1 && ids >= 0, "replay: passes >= 1 and ids >= 0");
  const auto e = events.contiguous();
  const std::int64_t* row = e.data_ptr<std::int64_t>();
  const std::int64_t n = e.size(0);
  std::vector<cudaStream_t> handles;
  for (std::int64_t s : streams) handles.push_back(reinterpret_cast<cudaStream_t>(s));
  std::vector<void*> live(static_cast<std::size_t>(ids), nullptr);
  torch::Tensor ns = torch::zeros({n}, torch::kInt64);
  std::int64_t* out = ns.data_ptr<std::int64_t>();
  for (std::int64_t pass = 1; pass <= passes; ++pass) {
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t* r = row + 4 * i;
      TORCH_CHECK(r[1] >= 0 && r[1] < ids && r[3] >= 0 &&
                      r[3] < static_cast<std::int64_t>(handles.size()),
                  "replay: event ", i, " names an unknown id or stream");
      void*& p = live[static_cast<std::size_t>(r[1])];
      const auto t0 = clock_type::now();
      if (r[0] == 0) {
        p = cca::raw_alloc_with_stream(static_cast<std::size_t>(r[2]),
                                       handles[static_cast<std::size_t>(r[3])]);
      } else {
        cca::raw_delete(p);
        p = nullptr;
      }
      const auto t1 = clock_type::now();
      out[i] = std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
    }
    for (void*& p : live)
      if (p) {
        cca::raw_delete(p);
        p = nullptr;
      }
    TORCH_CHECK(cudaDeviceSynchronize() == cudaSuccess, "replay: cudaDeviceSynchronize failed");
  }
  return ns;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("replay", &replay, "replay a trace through PyTorch's CUDA allocator interface");
}
