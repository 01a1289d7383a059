#include "umem/core/text_file.hpp"

#include <cerrno>
#include <fstream>
#include <sstream>

#include "umem/core/error.hpp"

namespace umem {

std::string read_text_file(const std::filesystem::path& file, const std::string& what) {
  std::error_code ec;
  if (!std::filesystem::exists(file, ec))
    throw_error(errc::not_found, what + " '" + file.string() + "' does not exist");
  if (std::filesystem::is_directory(file, ec))
    throw_error(errc::invalid_argument, what + " '" + file.string() + "' is a directory, not a file");
  std::ifstream in(file, std::ios::binary);
  if (!in) throw_errno(errc::io_error, "cannot open " + what + " '" + file.string() + "'", errno);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw_errno(errc::io_error, "cannot read " + what + " '" + file.string() + "'", errno);
  return ss.str();
}

}  // namespace umem
