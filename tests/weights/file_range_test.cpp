// read_file_range (file_range.hpp): exact bytes at any offset, with and without O_DIRECT, readers
// bound to CPUs without moving the caller, and the errors of a bad range or a misaligned
// direct read. Files are written here; the layout of a safetensors file points at its data.
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "expect_invalid.hpp"
#include "umem/weights/file_range.hpp"
#include "umem/weights/safetensors_file.hpp"

namespace umem::weights {
namespace {

namespace fs = std::filesystem;

char byte_at(std::uint64_t i) { return static_cast<char>(i * 13 % 253); }

class FileRange : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("umem-file-range-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    path_ = (dir_ / "f.bin").string();
    std::string body(size_, '\0');
    for (std::uint64_t i = 0; i < size_; ++i) body[i] = byte_at(i);
    std::ofstream(path_, std::ios::binary) << body;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Whether `got` holds the file's bytes [offset, offset + n).
  static bool holds(const char* got, std::uint64_t offset, std::uint64_t n) {
    for (std::uint64_t i = 0; i < n; ++i)
      if (got[i] != byte_at(offset + i)) return false;
    return true;
  }

  struct aligned_buffer {
    // aligned_alloc wants a size that is a multiple of the alignment (C11).
    explicit aligned_buffer(std::size_t n)
        : p(static_cast<char*>(std::aligned_alloc(
              direct_io_alignment,
              (n + direct_io_alignment - 1) / direct_io_alignment * direct_io_alignment))) {}
    ~aligned_buffer() { std::free(p); }
    char* p;
  };

  const std::uint64_t size_ = (std::uint64_t{8} << 20) * 2 + 4096 * 3 + 777;  // 3 chunks
  fs::path dir_;
  std::string path_;
};

TEST_F(FileRange, ReadsExactlyTheBytesAskedForAtAnyOffset) {
  for (const auto& [offset, n] : std::vector<std::pair<std::uint64_t, std::uint64_t>>{
           {0, size_}, {5, 100}, {(8u << 20) - 3, 9}, {size_ - 1, 1}, {size_, 0}}) {
    std::vector<char> got(n + 1, '\x7f');
    read_file_range(path_, offset, n, got.data(), read_options{3, false, {}});
    EXPECT_TRUE(holds(got.data(), offset, n)) << offset << " + " << n;
    EXPECT_EQ(got[n], '\x7f') << "wrote past the range at " << offset;
  }
}

TEST_F(FileRange, DirectReadsTakeAlignedOffsetsAndReadALastPartialBlockPlainly) {
  const std::uint64_t offset = 4096 * 5;
  const std::uint64_t n = size_ - offset;  // ends 777 bytes into a block
  aligned_buffer buf(static_cast<std::size_t>(n + 4096));
  buf.p[n] = '\x7f';
  read_file_range(path_, offset, n, buf.p, read_options{2, true, {}});
  EXPECT_TRUE(holds(buf.p, offset, n));
  EXPECT_EQ(buf.p[n], '\x7f');
  expect_invalid([&] { read_file_range(path_, offset + 8, 16, buf.p, {0, true, {}}); },
                 "direct_io needs the file offset (20488) and the buffer's address to be "
                 "multiples of 4096");
  expect_invalid([&] { read_file_range(path_, offset, 16, buf.p + 8, {0, true, {}}); },
                 "multiples of 4096");
}

TEST_F(FileRange, BoundReadersLeaveTheCallersCpusAsTheyWere) {
  cpu_set_t before;
  ASSERT_EQ(sched_getaffinity(0, sizeof before, &before), 0);
  unsigned first = 0;
  while (!CPU_ISSET(first, &before)) ++first;
  std::vector<char> got(static_cast<std::size_t>(size_));
  read_file_range(path_, 0, size_, got.data(), read_options{4, false, {first}});
  EXPECT_TRUE(holds(got.data(), 0, size_));
  cpu_set_t after;
  ASSERT_EQ(sched_getaffinity(0, sizeof after, &after), 0);
  EXPECT_TRUE(CPU_EQUAL(&before, &after));
}

TEST_F(FileRange, ARangePastTheEndOrAMissingFileIsAnErrorSayingSo) {
  std::vector<char> got(16);
  expect_invalid([&] { read_file_range(path_, size_ - 4, 8, got.data()); },
                 "file " + path_ + ": bytes [" + std::to_string(size_ - 4) + ", " +
                     std::to_string(size_ + 4) + ") run past its end at " +
                     std::to_string(size_));
  expect_invalid([&] { read_file_range((dir_ / "none").string(), 0, 1, got.data()); },
                 "cannot open it: No such file or directory");
  expect_invalid([&] { read_file_range(dir_.string(), 0, 1, got.data()); },
                 "not a regular file");
  expect_invalid([&] { read_file_range(path_, 0, 1, nullptr); }, "a null buffer");
}

TEST_F(FileRange, ASafetensorsLayoutPointsAtTheDataTheFullReaderLoads) {
  const std::string header = R"({"t": {"dtype": "U8", "shape": [5], "data_offsets": [0, 5]}})";
  std::string file(8, '\0');
  file[0] = static_cast<char>(header.size());
  file += header + "abcde";
  const std::string p = (dir_ / "m.safetensors").string();
  std::ofstream(p, std::ios::binary) << file;
  const safetensors_layout l = read_safetensors_header(p);
  EXPECT_EQ(l.data_offset, 8 + header.size());
  EXPECT_EQ(l.data_bytes, 5u);
  ASSERT_EQ(l.header.tensors.size(), 1u);
  std::string got(5, '\0');
  read_file_range(p, l.data_offset, l.data_bytes, got.data());
  EXPECT_EQ(got, "abcde");
}

}  // namespace
}  // namespace umem::weights
