#include "umem/weights/safetensors_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>

#include "file_io.hpp"
#include "umem/core/error.hpp"

namespace umem::weights {
namespace {

using detail::errno_text;
using detail::file_descriptor;
using detail::read_at;

constexpr std::size_t page = direct_io_alignment;  // Note [Reading weights]

struct opened {
  file_descriptor fd;
  std::uint64_t size = 0;
  std::uint64_t data_offset = 0;
  safetensors_header header;
  explicit opened(const std::string& path) : fd(path, O_RDONLY | O_CLOEXEC) {}
};

void open_and_parse(const std::string& path, opened& f) {
  if (f.fd.get() < 0)
    throw_error(errc::invalid_argument,
                "safetensors file " + path + ": cannot open it: " + errno_text(errno));
  struct stat st {};
  if (::fstat(f.fd.get(), &st) != 0)
    throw_error(errc::runtime_error, "safetensors file " + path + ": fstat: " + errno_text(errno));
  if (!S_ISREG(st.st_mode))
    throw_error(errc::invalid_argument, "safetensors file " + path + ": not a regular file");
  f.size = static_cast<std::uint64_t>(st.st_size);
  unsigned char prefix[8];
  if (f.size < 8 || read_at(f.fd.get(), prefix, 8, 0) != 8)
    throw_error(errc::invalid_argument,
                "safetensors file " + path + ": " + std::to_string(f.size) +
                    " bytes, shorter than the 8-byte header size that starts the format");
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | prefix[i];  // little-endian
  if (n > max_header_bytes || n > f.size - 8)
    throw_error(errc::invalid_argument,
                "safetensors file " + path + ": the header claims " + std::to_string(n) +
                    " bytes, " +
                    (n > max_header_bytes ? "above the format's limit of " +
                                                std::to_string(max_header_bytes)
                                          : "more than the " + std::to_string(f.size - 8) +
                                                " the file has after its size field") +
                    " (not a safetensors file, or a truncated one)");
  std::string json(static_cast<std::size_t>(n), '\0');
  if (read_at(f.fd.get(), json.data(), json.size(), 8) != static_cast<long long>(n))
    throw_error(errc::runtime_error, "safetensors file " + path + ": reading the header failed");
  f.data_offset = 8 + n;
  f.header = parse_safetensors_header(json, f.size - f.data_offset, path);
}

}  // namespace

safetensors_layout read_safetensors_header(const std::string& path) {
  opened f(path);
  open_and_parse(path, f);
  return {std::move(f.header), f.data_offset, f.size - f.data_offset};
}

loaded_safetensors read_safetensors(const std::string& path, const allocate_fn& allocate,
                                    const release_fn& release, const read_options& options) {
  opened f(path);
  open_and_parse(path, f);
  loaded_safetensors out;
  out.path = path;
  out.data_bytes = f.size - f.data_offset;
  int fd = f.fd.get();
  std::uint64_t from = f.data_offset;
  std::uint64_t length = out.data_bytes;
  std::size_t lead = 0;  // bytes read before the data section (direct_io's alignment)
  std::optional<file_descriptor> direct;
  if (options.direct_io) {
    direct.emplace(detail::open_direct(path, "safetensors file " + path));
    fd = direct->get();
    from = f.data_offset / page * page;
    lead = static_cast<std::size_t>(f.data_offset - from);
    length = (f.size - from + page - 1) / page * page;
  }
  out.block_bytes = static_cast<std::size_t>(std::max<std::uint64_t>(
      options.direct_io ? length + page : out.data_bytes, 1));
  out.block = allocate(out.block_bytes);
  auto* base = static_cast<std::byte*>(out.block);
  if (options.direct_io) {
    const auto a = reinterpret_cast<std::uintptr_t>(base);
    base += (page - a % page) % page;  // O_DIRECT needs an aligned buffer too
  }
  const std::string failure =
      detail::parallel_read(fd, base, from, options.direct_io ? length - page : length, options);
  // The direct read's last page runs past the end of the file: read what is left plainly.
  std::string tail_failure;
  if (failure.empty() && options.direct_io) {
    const std::uint64_t done = length - page;
    if (from + done < f.size) {
      const auto rest = static_cast<std::size_t>(f.size - (from + done));
      if (read_at(f.fd.get(), base + done, rest, from + done) != static_cast<long long>(rest))
        tail_failure = "reading the last " + std::to_string(rest) + " bytes failed";
    }
  }
  if (!failure.empty() || !tail_failure.empty()) {
    release(out.block);
    throw_error(errc::runtime_error, "safetensors file " + path + ": " +
                                         (failure.empty() ? tail_failure : failure));
  }
  out.data = base + lead;
  out.header = std::move(f.header);
  return out;
}

}  // namespace umem::weights
