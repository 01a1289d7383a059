// The header of a .safetensors file, parsed and checked against the format's rules.
//
// Note [safetensors format]
// A file is an 8-byte little-endian header size N, N bytes of a UTF-8 JSON object (trailing
// spaces allowed), then the data section. Each key of the object but "__metadata__" (an object of
// strings) names a tensor: {"dtype": one of dtype_name()'s names, "shape": [non-negative
// integers], "data_offsets": [begin, end]} with offsets relative to the data section. The format
// requires the tensors to cover the data section exactly: sorted by begin, the first starts at 0,
// each starts where the previous ended, the last ends at the section's end, and each holds
// exactly product(shape) * itemsize bytes. Anything else is an error naming the file, the tensor
// and what is wrong (the reference implementation, huggingface/safetensors, rejects the same).
// Unknown keys inside a tensor's entry are ignored. Headers above max_header_bytes are refused
// (the reference implementation's limit) before anything is read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace umem::weights {

enum class dtype : std::uint8_t {
  f64, f32, f16, bf16, i64, i32, i16, i8, u8, u16, u32, u64, boolean, f8_e4m3, f8_e5m2
};

// The format's name ("F32", "BF16", "BOOL", "F8_E4M3", ...).
std::string_view dtype_name(dtype d);
std::size_t itemsize(dtype d);

struct tensor_entry {
  std::string name;
  weights::dtype dtype = dtype::u8;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0;  // in the data section
  std::uint64_t end = 0;
};

struct safetensors_header {
  std::vector<tensor_entry> tensors;  // sorted by begin
  std::map<std::string, std::string> metadata;
};

inline constexpr std::uint64_t max_header_bytes = 100'000'000;

// Parses the JSON header of `file` (used in messages) whose data section is `data_bytes` long.
// Throws umem::error(invalid_argument) naming the file, the tensor and the rule broken.
safetensors_header parse_safetensors_header(std::string_view json, std::uint64_t data_bytes,
                                            std::string_view file);

}  // namespace umem::weights
