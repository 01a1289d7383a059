#include "tar_gz.hpp"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <fstream>

#include "umem/core/error.hpp"

namespace umem::umtopo {
namespace {

namespace fs = std::filesystem;

fs::path temp(const std::string& name) { return fs::temp_directory_path() / (name + "_" + std::to_string(getpid())); }

std::string error_of(const fs::path& file) {
  try {
    read_tar_gz(file);
  } catch (const error& e) {
    return e.what();
  }
  return "no error";
}

void write_gz(const fs::path& file, const std::string& bytes) {
  gzFile f = gzopen(file.c_str(), "wb");
  gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
}

TEST(TarGz, RoundTripsFilesDirectoriesAndLongNames) {
  const std::string long_name = "root/sys/class/kfd/kfd/topology/nodes/4/mem_banks/0/" + std::string(80, 'p') + "/properties";
  const std::vector<tar_entry> entries = {{"manifest.json", false, "{}\n"},
                                          {"root", true, {}},
                                          {"root/proc/meminfo", false, std::string(1500, 'x')},
                                          {"root/empty", false, {}},
                                          {long_name, false, "heap_type 0\n"}};
  const fs::path f = temp("tar_roundtrip.tar.gz");
  write_tar_gz(f, entries);
  EXPECT_EQ(read_tar_gz(f), entries);
  // Any tar reads it: GNU tar lists the same names.
  const std::string cmd = "tar tzf '" + f.string() + "' > '" + f.string() + ".list' 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  std::ifstream list(f.string() + ".list");
  std::vector<std::string> names;
  for (std::string l; std::getline(list, l);) names.push_back(l);
  EXPECT_EQ(names, (std::vector<std::string>{"manifest.json", "root/", "root/proc/meminfo", "root/empty", long_name}));
  fs::remove(f.string() + ".list");
  fs::remove(f);
}

TEST(TarGz, DamagedArchivesAreOneClearError) {
  const fs::path f = temp("tar_damaged.tar.gz");
  write_tar_gz(f, {{"a", false, std::string(4000, 'a')}});
  std::string bytes;
  {
    std::ifstream in(f, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::ofstream(f, std::ios::binary | std::ios::trunc) << bytes.substr(0, bytes.size() / 2);
  EXPECT_NE(error_of(f).find("not a gather written by umtopo --gather"), std::string::npos) << error_of(f);

  std::ofstream(f, std::ios::binary | std::ios::trunc) << "just text, not an archive\n";
  EXPECT_NE(error_of(f).find("not gzip-compressed"), std::string::npos) << error_of(f);

  write_gz(f, std::string(512, '7'));  // gzip, but no tar header inside
  EXPECT_NE(error_of(f).find("bad checksum"), std::string::npos) << error_of(f);
  fs::remove(f);
}

TEST(TarGz, RefusesNamesOutsideTheArchive) {
  const fs::path f = temp("tar_escape.tar.gz");
  for (const char* name : {"../etc/passwd", "root/../../x", "/etc/passwd"}) {
    write_tar_gz(f, {{name, false, "x"}});
    EXPECT_NE(error_of(f).find("points outside the archive"), std::string::npos) << name << ": " << error_of(f);
  }
  fs::remove(f);
}

}  // namespace
}  // namespace umem::umtopo
