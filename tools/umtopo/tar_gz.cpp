#include "tar_gz.hpp"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <memory>

#include "umem/core/error.hpp"

namespace umem::umtopo {
namespace {

constexpr std::size_t kBlock = 512;
// A gather of a 4-socket node is a few MiB; far more means this is not a gather.
constexpr std::uint64_t kMaxEntryBytes = 64ull << 20;
constexpr std::uint64_t kMaxTotalBytes = 512ull << 20;

using header = std::array<char, kBlock>;

struct gz_closer {
  void operator()(gzFile f) const { gzclose(f); }
};
using gz_file = std::unique_ptr<gzFile_s, gz_closer>;

// The ustar fields write_tar_gz fills (POSIX.1-1988 layout).
struct field {
  std::size_t offset, size;
};
constexpr field kName{0, 100}, kMode{100, 8}, kUid{108, 8}, kGid{116, 8}, kSize{124, 12}, kMtime{136, 12},
    kChecksum{148, 8}, kType{156, 1}, kMagic{257, 6}, kVersion{263, 2}, kPrefix{345, 155};

void put_octal(header& h, field f, std::uint64_t v) {
  std::snprintf(h.data() + f.offset, f.size, "%0*llo", static_cast<int>(f.size - 1),
                static_cast<unsigned long long>(v));
}

unsigned checksum(const header& h) {
  unsigned sum = 0;
  for (std::size_t i = 0; i < kBlock; ++i)
    sum += (i >= kChecksum.offset && i < kChecksum.offset + kChecksum.size) ? ' ' : static_cast<unsigned char>(h[i]);
  return sum;
}

std::string get_text(const header& h, field f) {
  const char* p = h.data() + f.offset;
  return std::string(p, strnlen(p, f.size));
}

bool get_octal(const header& h, field f, std::uint64_t& v) {
  v = 0;
  bool digits = false;
  for (std::size_t i = 0; i < f.size; ++i) {
    const char c = h[f.offset + i];
    if (c == ' ' && !digits) continue;
    if (c == '\0' || c == ' ') break;
    if (c < '0' || c > '7' || v > (~0ull >> 3)) return false;
    v = v * 8 + static_cast<unsigned>(c - '0');
    digits = true;
  }
  return digits;
}

// ustar splits a long name at a '/' into prefix (155) and name (100).
void put_name(header& h, const std::string& name, const std::filesystem::path& file) {
  if (name.size() < kName.size) {
    std::memcpy(h.data() + kName.offset, name.data(), name.size());
    return;
  }
  const auto cut = name.rfind('/', kPrefix.size);
  if (cut == std::string::npos || name.size() - cut - 1 >= kName.size)
    throw_error(errc::invalid_argument, file.string() + ": entry name too long for ustar: " + name);
  std::memcpy(h.data() + kPrefix.offset, name.data(), cut);
  std::memcpy(h.data() + kName.offset, name.data() + cut + 1, name.size() - cut - 1);
}

bool safe_name(const std::string& name) {
  if (name.empty() || name.front() == '/') return false;
  std::size_t start = 0;
  while (start <= name.size()) {
    const auto end = std::min(name.find('/', start), name.size());
    const std::string part = name.substr(start, end - start);
    if (part == "." || part == "..") return false;
    if (part.empty() && end != name.size()) return false;
    start = end + 1;
  }
  return true;
}

class reader {
 public:
  explicit reader(const std::filesystem::path& file) : file_(file), gz_(gzopen(file.c_str(), "rb")) {
    if (!gz_) throw_errno(errc::io_error, "cannot open " + file.string(), errno);
    require_gzip();
  }
  // False at a clean end of data; throws for a truncated or corrupt stream.
  bool read(char* out, std::size_t n, bool end_ok) {
    const int got = gzread(gz_.get(), out, static_cast<unsigned>(n));
    if (got == static_cast<int>(n)) return true;
    int err = Z_OK;
    const char* why = gzerror(gz_.get(), &err);
    if (got < 0 || err != Z_OK) fail(std::string("not a readable gzip stream (") + why + ")");
    if (got == 0 && end_ok) return false;
    fail("truncated");
  }
  // zlib reads a file that is not gzip as it is; a gather always is gzip. Right after gzopen,
  // gzdirect looks at the first bytes to tell.
  void require_gzip() const {
    if (gzdirect(gz_.get()) != 0) fail("not gzip-compressed");
  }
  [[noreturn]] void fail(const std::string& why) const {
    throw_error(errc::parse_error, file_.string() + ": " + why + "; not a gather written by umtopo --gather");
  }

 private:
  std::filesystem::path file_;
  gz_file gz_;
};

}  // namespace

void write_tar_gz(const std::filesystem::path& file, const std::vector<tar_entry>& entries) {
  gz_file gz(gzopen(file.c_str(), "wb9"));
  if (!gz) throw_errno(errc::io_error, "cannot write " + file.string(), errno);
  auto put = [&](const char* data, std::size_t n) {
    if (n != 0 && gzwrite(gz.get(), data, static_cast<unsigned>(n)) != static_cast<int>(n))
      throw_error(errc::io_error, "cannot write " + file.string());
  };
  const header zeros{};
  for (const tar_entry& e : entries) {
    header h{};
    put_name(h, e.directory ? e.name + "/" : e.name, file);
    put_octal(h, kMode, e.directory ? 0755 : 0644);
    put_octal(h, kUid, 0);
    put_octal(h, kGid, 0);
    put_octal(h, kSize, e.directory ? 0 : e.content.size());
    put_octal(h, kMtime, 0);  // reproducible: the manifest carries the date
    h[kType.offset] = e.directory ? '5' : '0';
    std::memcpy(h.data() + kMagic.offset, "ustar", 6);
    std::memcpy(h.data() + kVersion.offset, "00", 2);
    std::snprintf(h.data() + kChecksum.offset, kChecksum.size, "%06o", checksum(h));
    h[kChecksum.offset + 7] = ' ';  // "NNNNNN\0 ", as POSIX spells it
    put(h.data(), kBlock);
    put(e.content.data(), e.content.size());
    put(zeros.data(), (kBlock - e.content.size() % kBlock) % kBlock);
  }
  put(zeros.data(), kBlock);
  put(zeros.data(), kBlock);
  if (gzclose(gz.release()) != Z_OK) throw_error(errc::io_error, "cannot write " + file.string());
}

std::vector<tar_entry> read_tar_gz(const std::filesystem::path& file) {
  reader in(file);
  std::vector<tar_entry> entries;
  std::uint64_t total = 0;
  header h{};
  while (in.read(h.data(), kBlock, true)) {
    if (std::all_of(h.begin(), h.end(), [](char c) { return c == '\0'; })) return entries;  // end marker
    std::uint64_t sum = 0, size = 0;
    if (!get_octal(h, kChecksum, sum) || sum != checksum(h)) in.fail("a tar header has a bad checksum");
    if (get_text(h, kMagic).substr(0, 5) != "ustar") in.fail("not a ustar archive");
    const std::string prefix = get_text(h, kPrefix);
    std::string name = (prefix.empty() ? "" : prefix + "/") + get_text(h, kName);
    if (!get_octal(h, kSize, size) || size > kMaxEntryBytes || (total += size) > kMaxTotalBytes)
      in.fail("entry '" + name + "' has an implausible size");
    const char type = h[kType.offset];
    tar_entry e;
    e.directory = type == '5';
    if (e.directory && name.ends_with('/')) name.pop_back();
    if (type != '0' && type != '\0' && type != '5')
      in.fail("entry '" + name + "' is not a plain file or directory (tar type '" + std::string(1, type) + "')");
    if (!safe_name(name)) in.fail("entry name '" + name + "' points outside the archive");
    e.name = std::move(name);
    e.content.resize(size);
    if (size != 0) in.read(e.content.data(), size, false);
    std::array<char, kBlock> pad{};
    if (size % kBlock != 0) in.read(pad.data(), kBlock - size % kBlock, false);
    entries.push_back(std::move(e));
  }
  in.fail("it ends without the tar end marker");
}

}  // namespace umem::umtopo
