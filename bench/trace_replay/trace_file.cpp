#include "trace_file.hpp"

#include <zlib.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "umem/core/error.hpp"

namespace umem::trace_replay {

namespace {

std::string gunzip(const std::filesystem::path& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw_errno(errc::io_error, "cannot open " + path.string(), errno);
  std::string out;
  char buf[1 << 16];
  int n = 0;
  while ((n = gzread(f, buf, sizeof buf)) > 0) out.append(buf, static_cast<std::size_t>(n));
  int code = Z_OK;
  const std::string why = n < 0 ? gzerror(f, &code) : "";
  gzclose(f);
  if (n < 0)
    throw_error(errc::io_error, path.string() + ": not a readable gzip file (" + why +
                                    "); give a .csv.gz written by gzip or a plain .csv");
  return out;
}

}  // namespace

trace load_trace(const std::filesystem::path& path) {
  if (!std::filesystem::exists(path))
    throw_error(errc::not_found, "trace " + path.string() + " does not exist");
  if (path.extension() == ".gz") {
    std::istringstream in(gunzip(path));
    return parse_trace(in, path.string());
  }
  std::ifstream in(path);
  if (!in) throw_errno(errc::io_error, "cannot open " + path.string(), errno);
  return parse_trace(in, path.string());
}

std::uint64_t metadata_number(const trace& t, const char* key) {
  const auto j = nlohmann::json::parse(t.metadata, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains(key) || !j[key].is_number_unsigned())
    return 0;
  return j[key].get<std::uint64_t>();
}

}  // namespace umem::trace_replay
