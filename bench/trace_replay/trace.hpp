// An allocation trace as recorded from PyTorch's caching allocator (shared/reference/traces):
// text lines `op,id,size_bytes,stream`, optionally after a first line "# " + JSON metadata.
//
// Note [Trace operations]
//  a  allocation of block `id`; ids are dense, in allocation order (the n-th `a` has id n)
//  f  free of block `id` (completed from the host's view); size and stream as recorded
//  S  / s  a segment the recording allocator got from / gave back to the driver (id -1); a
//     replay only counts them
//  e  stream `stream` has finished all work enqueued before this line (an event it recorded
//     has completed, or the host synchronized it); id -1, size 0. Real traces have none: it is
//     the one extension of this reader, for multi-stream traces (stream_ordered_pool.hpp)
// Lines starting with '#' after the first, and empty lines, are ignored.
//
// The parser checks everything a replay relies on and throws umem::error(parse_error) naming
// "<source>:<line>" and what to fix: field count, the op, numbers, dense ids, a free of a block
// that is not live, a free whose size differs from its allocation.
//
// Self-contained (standard library and umem/core/error.hpp's inline constructor only) so that the
// PyTorch replay (cca/) compiles this file without the rest of umem.
#pragma once

#include <cstddef>
#include <cstdint>
#include <istream>
#include <string>
#include <vector>

namespace umem::trace_replay {

enum class op_kind : char {
  alloc = 'a',
  free = 'f',
  segment_alloc = 'S',
  segment_free = 's',
  stream_sync = 'e',
};

struct event {
  op_kind op = op_kind::alloc;
  std::int64_t id = -1;
  std::uint64_t size = 0;
  std::uint32_t stream = 0;
  std::uint32_t line = 0;  // 1-based line in the source, for messages
};

struct trace {
  std::string source;    // name used in messages (usually the file path)
  std::string metadata;  // the JSON text after "# " on line 1, or empty
  std::vector<event> events;
  std::size_t allocs = 0;
  std::size_t frees = 0;
  std::size_t segment_allocs = 0;
  std::size_t segment_frees = 0;
  std::size_t syncs = 0;
  std::vector<std::uint32_t> streams;  // distinct streams of a/f/e events, ascending
  std::size_t live_at_end = 0;         // blocks allocated and never freed
  std::uint64_t peak_live_bytes = 0;   // highest sum of live sizes (as recorded, unrounded)
};

// Reads every line of `in`. Throws umem::error(parse_error) "<source>:<line>: ..." on the first
// malformed line.
trace parse_trace(std::istream& in, const std::string& source);

}  // namespace umem::trace_replay
