// Reading bytes of a file straight into memory the caller provides, with several threads
// (Note [Reading weights] in safetensors_file.hpp): the whole data section of a file into one
// block, or one chunk after another into a small staging buffer (a discrete GPU's double buffer,
// python/umem/torch/weights.py).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace umem::weights {

// O_DIRECT's alignment of file offsets, lengths and buffers.
inline constexpr std::size_t direct_io_alignment = 4096;

struct read_options {
  unsigned threads = 0;    // 0: the machine's hardware threads, at most 16
  bool direct_io = false;  // O_DIRECT: the page cache keeps no second copy
  // CPUs the reading threads run on (the target NUMA node's, so the reads' kernel work and the
  // copies into the pages stay beside the memory); empty: wherever the scheduler puts them. The
  // calling thread's own affinity never changes.
  std::vector<unsigned> cpus;
};

// Reads exactly `bytes` at `offset` of the file `path` into `to`. With direct_io, `offset` and
// `to` must be multiples of direct_io_alignment; whole aligned blocks are read with O_DIRECT and
// a last partial block plainly. Throws umem::error: invalid_argument (cannot open, not a regular
// file, misaligned direct_io, O_DIRECT refused by the file system, a range past the end);
// runtime_error naming the offset and errno's text for a failed read.
void read_file_range(const std::string& path, std::uint64_t offset, std::uint64_t bytes, void* to,
                     const read_options& options = {});

}  // namespace umem::weights
