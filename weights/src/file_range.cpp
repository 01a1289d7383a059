#include "umem/weights/file_range.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "file_io.hpp"
#include "umem/core/error.hpp"

namespace umem::weights {
namespace detail {
namespace {

constexpr std::size_t chunk = std::size_t{8} << 20;  // one pread per chunk and thread

unsigned thread_count(const read_options& o, std::uint64_t bytes) {
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  const unsigned want = o.threads != 0 ? o.threads : std::min(hw, 16u);
  const auto chunks = static_cast<unsigned>(std::min<std::uint64_t>((bytes + chunk - 1) / chunk,
                                                                    1u << 16));
  return std::max(1u, std::min(want, chunks));
}

// Moves the calling (reader) thread onto `cpus`; a CPU set the kernel refuses (CPUs offline, a
// cgroup without them) leaves it where it is: the read is still right, only less local.
void run_on(const std::vector<unsigned>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (unsigned c : cpus)
    if (c < CPU_SETSIZE) CPU_SET(c, &set);
  if (CPU_COUNT(&set) > 0) (void)pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

}  // namespace

std::string errno_text(int err) { return std::strerror(err); }

file_descriptor::file_descriptor(const std::string& path, int flags)
    : fd_(::open(path.c_str(), flags)) {}

file_descriptor::~file_descriptor() {
  if (fd_ >= 0) ::close(fd_);
}

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

file_descriptor open_direct(const std::string& path, const std::string& what) {
  file_descriptor fd(path, O_RDONLY | O_CLOEXEC | O_DIRECT);
  if (fd.get() < 0)
    throw_error(errc::invalid_argument,
                what + ": direct_io: opening with O_DIRECT failed (" + errno_text(errno) +
                    "); its file system may not support it: read without direct_io");
  return fd;
}

std::string parallel_read(int fd, std::byte* to, std::uint64_t from, std::uint64_t bytes,
                          const read_options& options) {
  if (bytes == 0) return {};
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
  const unsigned threads = thread_count(options, bytes);
  // Bound readers are threads of their own, so the caller's affinity stays as it was.
  const bool bound = !options.cpus.empty();
  std::vector<std::thread> pool;
  for (unsigned t = bound ? 0 : 1; t < threads; ++t)
    pool.emplace_back([&] {
      if (bound) run_on(options.cpus);
      work();
    });
  if (!bound) work();
  for (std::thread& t : pool) t.join();
  return failure;
}

}  // namespace detail

void read_file_range(const std::string& path, std::uint64_t offset, std::uint64_t bytes, void* to,
                     const read_options& options) {
  using namespace detail;
  const std::string what = "file " + path;
  if (to == nullptr && bytes != 0)
    throw_error(errc::invalid_argument, what + ": reading into a null buffer");
  file_descriptor plain(path, O_RDONLY | O_CLOEXEC);
  if (plain.get() < 0)
    throw_error(errc::invalid_argument, what + ": cannot open it: " + errno_text(errno));
  struct stat st {};
  if (::fstat(plain.get(), &st) != 0 || !S_ISREG(st.st_mode))
    throw_error(errc::invalid_argument, what + ": not a regular file");
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (offset > size || bytes > size - offset)
    throw_error(errc::invalid_argument,
                what + ": bytes [" + std::to_string(offset) + ", " +
                    std::to_string(offset + bytes) + ") run past its end at " +
                    std::to_string(size));
  auto* out = static_cast<std::byte*>(to);
  std::uint64_t direct_bytes = 0;
  if (options.direct_io) {
    const auto address = reinterpret_cast<std::uintptr_t>(to);
    if (offset % direct_io_alignment != 0 || address % direct_io_alignment != 0)
      throw_error(errc::invalid_argument,
                  what + ": direct_io needs the file offset (" + std::to_string(offset) +
                      ") and the buffer's address to be multiples of " +
                      std::to_string(direct_io_alignment));
    direct_bytes = bytes / direct_io_alignment * direct_io_alignment;
    const file_descriptor direct = open_direct(path, what);
    const std::string failure = parallel_read(direct.get(), out, offset, direct_bytes, options);
    if (!failure.empty()) throw_error(errc::runtime_error, what + ": " + failure);
  }
  // The plain rest: everything without direct_io, the last partial block with it.
  const std::string failure =
      parallel_read(plain.get(), out + direct_bytes, offset + direct_bytes, bytes - direct_bytes,
                    options);
  if (!failure.empty()) throw_error(errc::runtime_error, what + ": " + failure);
}

}  // namespace umem::weights
