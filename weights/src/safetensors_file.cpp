#include "umem/weights/safetensors_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "umem/core/error.hpp"

namespace umem::weights {
namespace {

constexpr std::size_t page = 4096;                  // O_DIRECT's alignment (Note [Reading weights])
constexpr std::size_t chunk = std::size_t{8} << 20;  // one pread per chunk and thread

std::string errno_text(int err) { return std::strerror(err); }

class file_descriptor {
 public:
  file_descriptor(const std::string& path, int flags) : fd_(::open(path.c_str(), flags)) {}
  ~file_descriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  file_descriptor(const file_descriptor&) = delete;
  file_descriptor& operator=(const file_descriptor&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Reads exactly `bytes` at `offset` unless the file ends first; the bytes read, or -errno.
long long read_at(int fd, void* to, std::size_t bytes, std::uint64_t offset) {
  std::size_t done = 0;
  while (done < bytes) {
    const ssize_t n = ::pread(fd, static_cast<char*>(to) + done, bytes - done,
                              static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  return static_cast<long long>(done);
}

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

unsigned thread_count(const read_options& o, std::uint64_t bytes) {
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  const unsigned want = o.threads != 0 ? o.threads : std::min(hw, 16u);
  const auto chunks = static_cast<unsigned>(std::min<std::uint64_t>((bytes + chunk - 1) / chunk,
                                                                    1u << 16));
  return std::max(1u, std::min(want, chunks));
}

// Reads file bytes [from, from + bytes) into `to` with `threads` threads; the first failure as
// text, empty on success.
std::string parallel_read(int fd, std::byte* to, std::uint64_t from, std::uint64_t bytes,
                          unsigned threads) {
  const std::uint64_t chunks = (bytes + chunk - 1) / chunk;
  std::atomic<std::uint64_t> next{0};
  std::mutex failure_mutex;
  std::string failure;
  auto work = [&] {
    for (std::uint64_t c = next.fetch_add(1); c < chunks; c = next.fetch_add(1)) {
      const std::uint64_t at = c * chunk;
      const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(chunk, bytes - at));
      const long long got = read_at(fd, to + at, n, from + at);
      if (got == static_cast<long long>(n)) continue;
      const std::lock_guard lock(failure_mutex);
      if (failure.empty())
        failure = "reading " + std::to_string(n) + " bytes at file offset " +
                  std::to_string(from + at) + " failed: " +
                  (got < 0 ? errno_text(static_cast<int>(-got))
                           : "the file ended after " + std::to_string(got) + " (it shrank?)");
      next.store(chunks);
      return;
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  return failure;
}

}  // namespace

safetensors_header read_safetensors_header(const std::string& path) {
  opened f(path);
  open_and_parse(path, f);
  return std::move(f.header);
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
    direct.emplace(path, O_RDONLY | O_CLOEXEC | O_DIRECT);
    if (direct->get() < 0)
      throw_error(errc::invalid_argument,
                  "safetensors file " + path + ": direct_io: opening with O_DIRECT failed (" +
                      errno_text(errno) +
                      "); its file system may not support it: load without direct_io");
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
  const std::string failure = parallel_read(fd, base, from, options.direct_io ? length - page : length,
                                            thread_count(options, length));
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
