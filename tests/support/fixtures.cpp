#include "support/fixtures.hpp"

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace umem::test {

std::filesystem::path fixtures_dir() {
  // Test-only override; the library itself reads the environment only through core/options.
  if (const char* dir = std::getenv("UMEM_FIXTURES_DIR"); dir != nullptr && *dir != '\0')
    return dir;
  return UMEM_DEFAULT_FIXTURES_DIR;
}

std::filesystem::path bundled_dir() { return std::filesystem::path(UMEM_BUNDLED_DATA_DIR) / "machines"; }

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + p.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace umem::test
