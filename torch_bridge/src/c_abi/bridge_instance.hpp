// The state every file of libumem_torch's C ABI (umem/umem_torch.h, one file per section) shares:
// the process's one bridge and the calling thread's last failure. Internal to the library.
#pragma once

#include <atomic>

#include "umem/allocator/c_boundary.hpp"
#include "umem/torch_bridge/bridge.hpp"

namespace umem::torch_bridge::c_abi {

// The calling thread's last failure (umem_torch_last_error / umem_torch_last_status), and where
// the C boundary finds it (c_boundary.hpp: only a failure touches the thread_local).
alloc::c_failure& last_failure();
inline constexpr alloc::c_failure_source last{&last_failure};

// Set once, under enabling.cpp's creation lock; never destroyed: PyTorch frees tensors from static
// destructors and exit handlers.
extern std::atomic<bridge*> the_bridge;

// Creates the bridge from the environment's options unless it exists (enabling.cpp).
bridge& create_default_bridge();

// The bridge, made on first use. Inline: it is on every allocation's path.
inline bridge& get_bridge() {
  if (bridge* b = the_bridge.load(std::memory_order_acquire)) return *b;
  return create_default_bridge();
}

}  // namespace umem::torch_bridge::c_abi
