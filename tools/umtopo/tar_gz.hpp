// A gzip-compressed POSIX ustar archive of plain files and directories: what `umtopo --gather`
// writes and `--from-gather` reads. Any `tar xzf` unpacks it. Written on zlib alone (no
// libarchive) so the statically linked umtopo of the VM suite can gather too.
//
// Reading is defensive (a gather comes from another machine): a bad checksum, a truncated or
// non-gzip file, a link, a device, an absolute name or a ".." component is an error naming the
// archive and the entry, never a file outside the destination.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace umem::umtopo {

struct tar_entry {
  std::string name;  // relative, '/'-separated, no "." or ".." components
  bool directory = false;
  std::string content;  // empty for a directory
  bool operator==(const tar_entry&) const = default;
};

// Throws umem::error(io_error) when the file cannot be written.
void write_tar_gz(const std::filesystem::path& file, const std::vector<tar_entry>& entries);
// Throws umem::error(parse_error) for anything but an archive write_tar_gz could have written.
std::vector<tar_entry> read_tar_gz(const std::filesystem::path& file);

}  // namespace umem::umtopo
