// Reading one .safetensors file straight into memory the caller provides (umem memory on the
// right NUMA node), once: the header is parsed and checked (Note [safetensors format]), then the
// data section is read by several threads with pread, in chunks, into one block.
//
// Note [Reading weights]
// Why pread into the final memory: a loader that mmaps the file and copies, or reads into a
// buffer and copies, holds the model twice at its peak (on an APU the page cache is the same HBM
// as the tensors); here the only copy is the one the read makes. Several threads: one reader does
// not reach the storage's or the page cache's bandwidth. The destination's pages are placed by
// the allocator that made it (its NUMA binding), not by the threads that fill them; the readers
// run on the target node's CPUs when the caller names them (read_options::cpus), so the kernel's
// copy into the pages runs beside them. Where the final memory is a discrete GPU's, which a file
// read cannot reach, the section is read chunk by chunk into two small pinned buffers while the
// GPU copies the other one (load_safetensors in python/umem/torch/weights.py): host memory then
// holds two chunks, never the model. direct_io
// opens the file with O_DIRECT, so the page cache keeps no second copy: the block is then
// allocated 4 KiB larger on each side, the read starts at the 4 KiB boundary below the data
// section, and the data lies inside the block at the section's offset from that boundary. A file
// system without O_DIRECT (tmpfs) is an error saying so.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "umem/weights/file_range.hpp"
#include "umem/weights/safetensors_header.hpp"

namespace umem::weights {

struct loaded_safetensors {
  std::string path;
  safetensors_header header;
  void* block = nullptr;           // what allocate() returned; the caller frees it
  std::size_t block_bytes = 0;
  std::byte* data = nullptr;       // the data section, inside the block
  std::uint64_t data_bytes = 0;
};

// Memory for the data section: allocate(bytes) returns at least `bytes` bytes aligned to 256 or
// throws; release(p) gives back what allocate returned, when the read fails.
using allocate_fn = std::function<void*(std::size_t bytes)>;
using release_fn = std::function<void(void* p)>;

// Throws umem::error: invalid_argument for a file that breaks the format (naming the file, the
// tensor and the rule) or cannot be opened; runtime_error for a read that fails (naming the file,
// the offset and errno's text); what allocate throws (out_of_memory).
loaded_safetensors read_safetensors(const std::string& path, const allocate_fn& allocate,
                                    const release_fn& release, const read_options& options = {});

// Where a file's parts lie: its checked header, and the data section's file offset and length
// (tensor offsets count from data_offset).
struct safetensors_layout {
  safetensors_header header;
  std::uint64_t data_offset = 0;
  std::uint64_t data_bytes = 0;
};

// The header only, without reading the data (a reader that stages the data in chunks reads the
// section itself with read_file_range). Throws as read_safetensors does.
safetensors_layout read_safetensors_header(const std::string& path);

}  // namespace umem::weights
