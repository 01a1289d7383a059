// What umem_cuda_allocator.cpp needs to know about the PyTorch it is built against, from 2.6 to
// 2.14, CUDA and ROCm builds.
//
// Note [PyTorch releases]
// c10::cuda::CUDACachingAllocator::CUDAAllocator, the interface the extension implements, changed
// in most releases. Compared here (the releases Debian packages: 2.6.0, 2.14.1; and 2.11, whose
// wheel built the extension on the H200), the changes are:
//   emptyCache(), snapshot() -> emptyCache(MempoolId_t), snapshot(MempoolId_t[, include_traces])
//     (per-pool empty_cache and snapshots: pytorch PRs 154746, 2025-06, and later);
//   ensureExistsAndIncrefPool(device, id) -> createOrIncrefPool(device, id[, allocator])
//     (a pool owning its allocator: PR 171962, 2026-01);
//   setUseOnOOM(device, id[, bool]), setNoSplit(device, id) (PRs 151487, 169699, 169739);
//   recordHistory(enabled, ctx, max, when[, clearHistory[, skip_actions]]);
//   pushCompileContext, popCompileContext, setUserMetadata, getUserMetadata;
//   getMemoryInfo and initialized() moving to the base class c10::DeviceAllocator (PR 138222);
//   TraceEntry with a MempoolId_t and a void* stream (c10::CachingDeviceAllocator);
//   getExpandableSegmentSizes (returns StreamSegmentSize, a type 2.6 lacks);
//   attachOomRejectionObserver, pure virtual in 2.14.1, absent in 2.11 (PR 179473, 2026-04).
// MI300A sites run the releases in between (2.9 and 2.10 in 2026), which no package here has,
// so the boundaries of most changes cannot be checked by compiling. A version macro with a
// guessed boundary would break exactly those releases. So the extension asks the compiler what
// the installed PyTorch declares (the traits below, C++17 detection), calls whichever form
// exists (the templates below: a discarded `if constexpr` branch of a template is never
// instantiated), and declares every form of a changed method without `override`: the form the
// base class has overrides it, the others are plain members nobody calls. A type an older release
// lacks is never named: getExpandableSegmentSizes returns whatever the installed release returns
// (segment_sizes), and an OOM rejection observer is the std::function it is in 2.14.1. A pure
// virtual form the extension does not know fails the build, which CI catches for 2.6.0 and
// 2.14.1. The version macros left are ROCm's (below). What a release lacks is listed at run
// time (lacking()), so umem.torch.mode() says it and nothing falls back silently.
//
// ROCm: torch.utils.cpp_extension hipifies the extension (and this header). Up to 2.10 hipify
// renames c10::cuda::CUDACachingAllocator to c10::hip::HIPCachingAllocator and get() to
// HIPCachingAllocatorMasqueradingAsCUDA::get() (pytorch issue 116722), consistently in the
// extension, so the names below stay right; from 2.11 ("hipify v2", PR 174087) CUDA names stay.
// torch/csrc/cuda/CUDAPluggableAllocator.h declared recordStream with a stream type that is
// wrong under ROCm until PR 150010 (2025-04, first in 2.8 [inferred]), so on older ROCm builds
// the extension does not include it; it is needed only to lend umem's memory to PyTorch's
// private pools, which those releases cannot take anyway (no createOrIncrefPool with an
// allocator).
#pragma once

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/version.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#define UMEM_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||       \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

// CUDAPluggableAllocator.h compiles under ROCm (see above).
#if !defined(USE_ROCM) || UMEM_TORCH_AT_LEAST(2, 8)
#define UMEM_TORCH_PLUGGABLE_HEADER 1
#else
#define UMEM_TORCH_PLUGGABLE_HEADER 0
#endif

namespace umem_extension {

namespace cca = c10::cuda::CUDACachingAllocator;

// The stream type of CUDAAllocator::recordStream. Up to 2.10, hipify renames c10::cuda::CUDAStream
// in an extension to HIPStreamMasqueradingAsCUDA, while HIPAllocator::recordStream takes
// c10::hip::HIPStream (the renaming of pytorch issue 116722); hipify v2 (PR 174087, 2.11) keeps
// CUDA names, and the type hipify leaves is the base's again.
#if defined(USE_ROCM) && !UMEM_TORCH_AT_LEAST(2, 11)
using allocator_stream = c10::hip::HIPStream;
#else
using allocator_stream = c10::cuda::CUDAStream;
#endif

// Names every release has: c10::cuda keeps MempoolId_t for compatibility once it moved to c10,
// and CUDACachingAllocator re-exports the trace types once they moved to CachingDeviceAllocator.
using mempool_id = c10::cuda::MempoolId_t;
using trace_entry = cca::TraceEntry;
using allocator_ptr = std::shared_ptr<cca::CUDAAllocator>;
// attachOomRejectionObserver's argument (c10 2.14.1's OomRejectionObserver).
using oom_rejection_observer = std::function<void(std::int64_t, std::size_t, std::size_t,
                                                  std::size_t)>;

// --- what the installed CUDAAllocator declares ------------------------------------------------
#define UMEM_TORCH_TRAIT(name, expression)                                              \
  template <class A, class = void>                                                      \
  struct name : std::false_type {};                                                     \
  template <class A>                                                                    \
  struct name<A, std::void_t<decltype(expression)>> : std::true_type {};                \
  template <class A = cca::CUDAAllocator>                                               \
  inline constexpr bool name##_v = name<A>::value;

UMEM_TORCH_TRAIT(has_pool_empty_cache, std::declval<A&>().emptyCache(mempool_id{}))
UMEM_TORCH_TRAIT(has_pool_snapshot, std::declval<A&>().snapshot(mempool_id{}))
UMEM_TORCH_TRAIT(has_trace_switch, std::declval<A&>().snapshot(mempool_id{}, true))
UMEM_TORCH_TRAIT(has_pool_allocator,
                 std::declval<A&>().createOrIncrefPool(c10::DeviceIndex{}, mempool_id{},
                                                       std::shared_ptr<A>{}))
UMEM_TORCH_TRAIT(has_create_or_incref,
                 std::declval<A&>().createOrIncrefPool(c10::DeviceIndex{}, mempool_id{}))
UMEM_TORCH_TRAIT(has_use_on_oom_flag,
                 std::declval<A&>().setUseOnOOM(c10::DeviceIndex{}, mempool_id{}, true))
UMEM_TORCH_TRAIT(has_use_on_oom, std::declval<A&>().setUseOnOOM(c10::DeviceIndex{}, mempool_id{}))
UMEM_TORCH_TRAIT(has_no_split, std::declval<A&>().setNoSplit(c10::DeviceIndex{}, mempool_id{}))
UMEM_TORCH_TRAIT(has_skip_actions,
                 std::declval<A&>().recordHistory(true, cca::CreateContextFn{}, std::size_t{},
                                                  cca::RecordContext{}, true,
                                                  std::vector<std::string>{}))
UMEM_TORCH_TRAIT(has_clear_history,
                 std::declval<A&>().recordHistory(true, cca::CreateContextFn{}, std::size_t{},
                                                  cca::RecordContext{}, true))
UMEM_TORCH_TRAIT(has_oom_rejection,
                 std::declval<A&>().attachOomRejectionObserver(
                     std::declval<oom_rejection_observer>()))
UMEM_TORCH_TRAIT(has_segment_sizes, std::declval<A&>().getExpandableSegmentSizes(c10::DeviceIndex{}))
UMEM_TORCH_TRAIT(has_compile_context, std::declval<A&>().popCompileContext())
UMEM_TORCH_TRAIT(has_user_metadata, std::declval<A&>().getUserMetadata())
#undef UMEM_TORCH_TRAIT

// What getExpandableSegmentSizes returns where the release has it (a vector of
// StreamSegmentSize), else a type of umem's that nothing asks for.
struct no_segment_sizes {};
template <class A, class = void>
struct segment_sizes_of {
  using type = no_segment_sizes;
};
template <class A>
struct segment_sizes_of<A, std::enable_if_t<has_segment_sizes_v<A>>> {
  using type = decltype(std::declval<A&>().getExpandableSegmentSizes(c10::DeviceIndex{}));
};
using segment_sizes = segment_sizes_of<cca::CUDAAllocator>::type;

// --- calls in whichever form the release has ---------------------------------------------------
template <class A>
void empty_cache(A& a, mempool_id id) {
  if constexpr (has_pool_empty_cache_v<A>)
    a.emptyCache(id);
  else
    a.emptyCache();  // one pool only: `id` is the default pool's
}

template <class A>
cca::SnapshotInfo snapshot(A& a, mempool_id id, bool include_traces) {
  if constexpr (has_trace_switch_v<A>)
    return a.snapshot(id, include_traces);
  else if constexpr (has_pool_snapshot_v<A>)
    return a.snapshot(id);
  else
    return a.snapshot();
}

// The pool's reference, with `lender`'s memory for a new pool where the release can take it.
template <class A>
void create_or_incref_pool(A& a, c10::DeviceIndex device, mempool_id id,
                           std::shared_ptr<A> lender) {
  if constexpr (has_pool_allocator_v<A>)
    a.createOrIncrefPool(device, id, std::move(lender));
  else if constexpr (has_create_or_incref_v<A>)
    a.createOrIncrefPool(device, id);
  else
    a.ensureExistsAndIncrefPool(device, id);
}

template <class A>
void set_use_on_oom(A& a, c10::DeviceIndex device, mempool_id id, bool on) {
  if constexpr (has_use_on_oom_flag_v<A>)
    a.setUseOnOOM(device, id, on);
  else if constexpr (has_use_on_oom_v<A>)
    a.setUseOnOOM(device, id);  // that form only turns it on
}

template <class A>
void set_no_split(A& a, c10::DeviceIndex device, mempool_id id) {
  if constexpr (has_no_split_v<A>) a.setNoSplit(device, id);
}

template <class A>
void record_history(A& a, bool enabled, cca::CreateContextFn recorder, std::size_t max_entries,
                    cca::RecordContext when, bool clear,
                    const std::vector<std::string>& skip_actions) {
  if constexpr (has_skip_actions_v<A>)
    a.recordHistory(enabled, recorder, max_entries, when, clear, skip_actions);
  else if constexpr (has_clear_history_v<A>)
    a.recordHistory(enabled, recorder, max_entries, when, clear);
  else
    a.recordHistory(enabled, recorder, max_entries, when);
}

template <class A>
segment_sizes expandable_segment_sizes(A& a, c10::DeviceIndex device) {
  if constexpr (has_segment_sizes_v<A>)
    return a.getExpandableSegmentSizes(device);
  else
    return {};
}

template <class A>
void attach_oom_rejection_observer(A& a, oom_rejection_observer observer) {
  if constexpr (has_oom_rejection_v<A>) a.attachOomRejectionObserver(std::move(observer));
}

template <class A>
void push_compile_context(A& a, std::string& context) {
  if constexpr (has_compile_context_v<A>) a.pushCompileContext(context);
}
template <class A>
void pop_compile_context(A& a) {
  if constexpr (has_compile_context_v<A>) a.popCompileContext();
}
template <class A>
void set_user_metadata(A& a, const std::string& metadata) {
  if constexpr (has_user_metadata_v<A>) a.setUserMetadata(metadata);
}
template <class A>
std::string user_metadata(A& a) {
  if constexpr (has_user_metadata_v<A>)
    return a.getUserMetadata();
  else
    return {};
}

// A trace entry; `stream` is a cudaStream_t, which newer releases keep as void*.
template <class E = trace_entry>
E make_trace_entry(typename E::Action action, c10::DeviceIndex device, std::size_t addr,
                   std::size_t size, void* stream, c10::approx_time_t time,
                   std::shared_ptr<c10::GatheredContext> context) {
  if constexpr (std::is_constructible_v<E, typename E::Action, c10::DeviceIndex, std::size_t,
                                        std::size_t, void*, mempool_id, c10::approx_time_t,
                                        std::shared_ptr<c10::GatheredContext>>)
    return E(action, device, addr, size, stream, mempool_id{0, 0}, time, std::move(context));
  else
    return E(action, device, addr, size, static_cast<cudaStream_t>(stream), time,
             std::move(context));
}

// What the installed release's interface cannot do, one line each (empty: nothing).
inline std::vector<std::string> lacking() {
  std::vector<std::string> out;
  if (!has_pool_allocator_v<>)
    out.emplace_back("private pools (CUDA graphs, MemPools) take PyTorch's own device memory, "
                     "not umem's (no createOrIncrefPool with an allocator)");
  if (!has_pool_empty_cache_v<>) out.emplace_back("empty_cache and snapshots of one MemPool");
  if (!has_use_on_oom_v<> && !has_use_on_oom_flag_v<>)
    out.emplace_back("MemPool(use_on_oom=True)");
  if (!has_no_split_v<>) out.emplace_back("MemPool(no_split=True)");
  if (!has_skip_actions_v<>) out.emplace_back("_record_memory_history(skip_actions=...)");
  if (!has_trace_switch_v<>) out.emplace_back("snapshots without trace entries");
#if !UMEM_TORCH_PLUGGABLE_HEADER
  out.emplace_back("CUDAPluggableAllocator.h (wrong stream type under ROCm before PR 150010)");
#endif
  return out;
}

}  // namespace umem_extension
