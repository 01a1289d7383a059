#include "umem/weights/safetensors_header.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <utility>

#include <nlohmann/json.hpp>

#include "umem/core/error.hpp"

namespace umem::weights {
namespace {

struct dtype_row {
  weights::dtype d;
  std::string_view name;
  std::size_t bytes;
};

constexpr std::array<dtype_row, 15> dtype_table{{
    {dtype::f64, "F64", 8},      {dtype::f32, "F32", 4},         {dtype::f16, "F16", 2},
    {dtype::bf16, "BF16", 2},    {dtype::i64, "I64", 8},         {dtype::i32, "I32", 4},
    {dtype::i16, "I16", 2},      {dtype::i8, "I8", 1},           {dtype::u8, "U8", 1},
    {dtype::u16, "U16", 2},      {dtype::u32, "U32", 4},         {dtype::u64, "U64", 8},
    {dtype::boolean, "BOOL", 1}, {dtype::f8_e4m3, "F8_E4M3", 1}, {dtype::f8_e5m2, "F8_E5M2", 1},
}};

const dtype_row& row_of(weights::dtype d) {
  for (const dtype_row& r : dtype_table)
    if (r.d == d) return r;
  throw_error(errc::internal, "safetensors: a dtype without a name");
}

[[noreturn]] void bad(std::string_view file, std::string_view tensor, const std::string& what) {
  throw_error(errc::invalid_argument,
              "safetensors file " + std::string(file) +
                  (tensor.empty() ? std::string() : ", tensor '" + std::string(tensor) + "'") +
                  ": " + what);
}

std::string known_dtypes() {
  std::string out;
  for (const dtype_row& r : dtype_table) out += (out.empty() ? "" : ", ") + std::string(r.name);
  return out;
}

std::uint64_t unsigned_of(const nlohmann::json& v, std::string_view file, std::string_view tensor,
                          const char* what) {
  if (!v.is_number_unsigned())
    bad(file, tensor, std::string(what) + " must be a non-negative integer, not " + v.dump());
  return v.get<std::uint64_t>();
}

tensor_entry entry_of(const std::string& name, const nlohmann::json& e, std::string_view file) {
  if (!e.is_object()) bad(file, name, std::string("its entry must be an object, not ") + e.type_name());
  tensor_entry t;
  t.name = name;
  const auto d = e.find("dtype");
  if (d == e.end() || !d->is_string()) bad(file, name, "no \"dtype\" string");
  const std::string dn = d->get<std::string>();
  const auto r = std::find_if(dtype_table.begin(), dtype_table.end(),
                              [&](const dtype_row& x) { return x.name == dn; });
  if (r == dtype_table.end())
    bad(file, name, "unknown dtype \"" + dn + "\" (the format's are " + known_dtypes() + ")");
  t.dtype = r->d;
  const auto s = e.find("shape");
  if (s == e.end() || !s->is_array()) bad(file, name, "no \"shape\" array");
  std::uint64_t elements = 1;
  for (const nlohmann::json& n : *s) {
    const std::uint64_t dim = unsigned_of(n, file, name, "every dimension of \"shape\"");
    if (dim > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) ||
        (dim != 0 && elements > std::numeric_limits<std::uint64_t>::max() / dim))
      bad(file, name, "the shape " + s->dump() + " has more elements than fit in 64 bits");
    elements *= dim;
    t.shape.push_back(static_cast<std::int64_t>(dim));
  }
  const auto o = e.find("data_offsets");
  if (o == e.end() || !o->is_array() || o->size() != 2)
    bad(file, name, "no \"data_offsets\" array of two integers");
  t.begin = unsigned_of((*o)[0], file, name, "\"data_offsets\"[0]");
  t.end = unsigned_of((*o)[1], file, name, "\"data_offsets\"[1]");
  if (t.end < t.begin)
    bad(file, name, "\"data_offsets\" " + o->dump() + " ends before it begins");
  if (elements > std::numeric_limits<std::uint64_t>::max() / r->bytes ||
      elements * r->bytes != t.end - t.begin)
    bad(file, name,
        "shape " + s->dump() + " of " + std::string(r->name) + " needs " +
            (elements > std::numeric_limits<std::uint64_t>::max() / r->bytes
                 ? std::string("more than 2^64")
                 : std::to_string(elements * r->bytes)) +
            " bytes, but \"data_offsets\" " + o->dump() + " hold " +
            std::to_string(t.end - t.begin));
  return t;
}

}  // namespace

std::string_view dtype_name(weights::dtype d) { return row_of(d).name; }
std::size_t itemsize(weights::dtype d) { return row_of(d).bytes; }

safetensors_header parse_safetensors_header(std::string_view json, std::uint64_t data_bytes,
                                            std::string_view file) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json.begin(), json.end());
  } catch (const nlohmann::json::exception& e) {
    bad(file, "", std::string("the header is not valid JSON: ") + e.what());
  }
  if (!j.is_object()) bad(file, "", std::string("the header must be a JSON object, not ") + j.type_name());
  safetensors_header h;
  for (const auto& [key, value] : j.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) bad(file, "", "\"__metadata__\" must be an object of strings");
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string())
          bad(file, "", "\"__metadata__\" entry \"" + k + "\" must be a string, not " + v.dump());
        h.metadata.emplace(k, v.get<std::string>());
      }
      continue;
    }
    h.tensors.push_back(entry_of(key, value, file));
  }
  std::sort(h.tensors.begin(), h.tensors.end(), [](const tensor_entry& a, const tensor_entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  std::uint64_t at = 0;
  const tensor_entry* previous = nullptr;
  for (const tensor_entry& t : h.tensors) {
    if (t.begin < at)
      bad(file, t.name,
          "its bytes [" + std::to_string(t.begin) + ", " + std::to_string(t.end) +
              ") overlap those of '" + previous->name + "', which end at " + std::to_string(at));
    if (t.begin > at)
      bad(file, t.name,
          "the data section has a hole: bytes [" + std::to_string(at) + ", " +
              std::to_string(t.begin) + ") belong to no tensor (the format allows none)");
    at = t.end;
    previous = &t;
  }
  if (at > data_bytes)
    bad(file, previous->name,
        "its bytes end at " + std::to_string(at) + ", past the data section's " +
            std::to_string(data_bytes) + " bytes (a truncated file?)");
  if (at < data_bytes)
    bad(file, "",
        "the last " + std::to_string(data_bytes - at) + " bytes of the data section belong to no "
        "tensor (the format allows none)");
  return h;
}

}  // namespace umem::weights
