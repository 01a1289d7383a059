#include "trace.hpp"

#include <algorithm>
#include <charconv>
#include <set>
#include <string_view>
#include <type_traits>
#include <unordered_map>

#include "umem/core/error.hpp"

namespace umem::trace_replay {

namespace {

constexpr const char* expected_form =
    "expected `op,id,size_bytes,stream` with op one of a f S s e (see trace.hpp)";

class line_parser {
 public:
  line_parser(const std::string& source, std::uint32_t line, std::string_view text)
      : source_(source), line_(line), text_(text) {}

  [[noreturn]] void fail(const std::string& what) const {
    std::string shown(text_.substr(0, 120));
    throw error(errc::parse_error, source_ + ":" + std::to_string(line_) + ": " + what +
                                       " in '" + shown + "'; " + expected_form);
  }

  template <class T>
  T number(std::string_view field, const char* name) const {
    T v{};
    const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), v);
    if (field.empty() || ec != std::errc{} || end != field.data() + field.size())
      fail(std::string(name) + " '" + std::string(field) + "' is not " +
           (std::is_signed_v<T> ? "an integer" : "a non-negative integer") +
           (ec == std::errc::result_out_of_range ? " in range" : ""));
    return v;
  }

 private:
  const std::string& source_;
  std::uint32_t line_;
  std::string_view text_;
};

struct live_record {
  std::uint64_t size;
  std::uint32_t line;
};

}  // namespace

trace parse_trace(std::istream& in, const std::string& source) {
  trace t;
  t.source = source;
  std::unordered_map<std::int64_t, live_record> live;
  std::set<std::uint32_t> streams;
  std::uint64_t live_bytes = 0;
  std::string text;
  std::uint32_t line = 0;
  while (std::getline(in, text)) {
    ++line;
    if (!text.empty() && text.back() == '\r') text.pop_back();
    if (line == 1 && text.rfind("# ", 0) == 0) {
      t.metadata = text.substr(2);
      continue;
    }
    if (text.empty() || text.front() == '#') continue;
    const line_parser p(source, line, text);
    std::string_view fields[4];
    std::size_t n = 0;
    std::string_view rest = text;
    while (true) {
      const auto comma = rest.find(',');
      if (n == 4) p.fail("more than 4 fields");
      fields[n++] = rest.substr(0, comma);
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
    if (n != 4) p.fail(std::to_string(n) + " field" + (n == 1 ? "" : "s") + " instead of 4");
    if (fields[0].size() != 1) p.fail("op '" + std::string(fields[0]) + "' is not one letter");
    event e;
    e.op = static_cast<op_kind>(fields[0][0]);
    e.id = p.number<std::int64_t>(fields[1], "id");
    e.size = p.number<std::uint64_t>(fields[2], "size_bytes");
    e.stream = p.number<std::uint32_t>(fields[3], "stream");
    e.line = line;
    switch (e.op) {
      case op_kind::alloc: {
        if (e.id != static_cast<std::int64_t>(t.allocs))
          p.fail("allocation id " + std::to_string(e.id) + " is not the next dense id " +
                 std::to_string(t.allocs));
        if (e.size == 0) p.fail("allocation of 0 bytes");
        live.emplace(e.id, live_record{e.size, line});
        live_bytes += e.size;
        t.peak_live_bytes = std::max(t.peak_live_bytes, live_bytes);
        ++t.allocs;
        streams.insert(e.stream);
        break;
      }
      case op_kind::free: {
        const auto it = live.find(e.id);
        if (it == live.end())
          p.fail("free of block " + std::to_string(e.id) +
                 (e.id >= 0 && e.id < static_cast<std::int64_t>(t.allocs)
                      ? " which is already freed"
                      : " which was never allocated"));
        if (it->second.size != e.size)
          p.fail("free of block " + std::to_string(e.id) + " with size " +
                 std::to_string(e.size) + " but line " + std::to_string(it->second.line) +
                 " allocated it with " + std::to_string(it->second.size));
        live_bytes -= e.size;
        live.erase(it);
        ++t.frees;
        streams.insert(e.stream);
        break;
      }
      case op_kind::segment_alloc:
      case op_kind::segment_free:
      case op_kind::stream_sync:
        if (e.id != -1)
          p.fail(std::string("op '") + fields[0][0] + "' must have id -1, not " +
                 std::to_string(e.id));
        if (e.op == op_kind::segment_alloc) ++t.segment_allocs;
        if (e.op == op_kind::segment_free) ++t.segment_frees;
        if (e.op == op_kind::stream_sync) {
          if (e.size != 0) p.fail("op 'e' must have size 0");
          ++t.syncs;
          streams.insert(e.stream);
        }
        break;
      default:
        p.fail("unknown op '" + std::string(fields[0]) + "'");
    }
    t.events.push_back(e);
  }
  if (in.bad())
    throw error(errc::io_error, source + ": read failed after line " + std::to_string(line));
  t.streams.assign(streams.begin(), streams.end());
  t.live_at_end = live.size();
  return t;
}

}  // namespace umem::trace_replay
