// The safetensors header's rules (Note [safetensors format]) and the parallel reader (Note
// [Reading weights]) on files written here byte by byte; checkpoint paths.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "expect_invalid.hpp"
#include "umem/core/error.hpp"
#include "umem/weights/checkpoint.hpp"
#include "umem/weights/safetensors_file.hpp"
#include "umem/weights/safetensors_header.hpp"

namespace umem::weights {
namespace {

namespace fs = std::filesystem;

TEST(safetensors_header, entries_come_sorted_by_offset_with_their_dtype_shape_and_metadata) {
  const auto h = parse_safetensors_header(
      R"({"b": {"dtype": "BF16", "shape": [2], "data_offsets": [24, 28]},
          "a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
          "__metadata__": {"format": "pt"}})",
      28, "m.safetensors");
  ASSERT_EQ(h.tensors.size(), 2u);
  EXPECT_EQ(h.tensors[0].name, "a");
  EXPECT_EQ(h.tensors[0].dtype, dtype::f32);
  EXPECT_EQ(h.tensors[0].shape, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(h.tensors[1].name, "b");
  EXPECT_EQ(dtype_name(h.tensors[1].dtype), "BF16");
  EXPECT_EQ(itemsize(h.tensors[1].dtype), 2u);
  EXPECT_EQ(h.metadata.at("format"), "pt");
}

TEST(safetensors_header, every_broken_rule_names_the_file_the_tensor_and_the_rule) {
  auto parse = [](const std::string& json, std::uint64_t bytes) {
    return [=] { (void)parse_safetensors_header(json, bytes, "x.safetensors"); };
  };
  expect_invalid(parse("[]", 0), "safetensors file x.safetensors: the header must be a JSON object");
  expect_invalid(parse("{", 0), "the header is not valid JSON");
  expect_invalid(parse(R"({"t": {"dtype": "Q4", "shape": [1], "data_offsets": [0, 1]}})", 1),
                 "tensor 't': unknown dtype \"Q4\" (the format's are F64, F32");
  expect_invalid(parse(R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": [0, 8]}})", 8),
                 "tensor 't': shape [1] of F32 needs 4 bytes, but \"data_offsets\" [0,8] hold 8");
  expect_invalid(parse(R"({"t": {"dtype": "U8", "shape": [4294967296, 4294967296, 2],
                             "data_offsets": [0, 1]}})", 1),
                 "has more elements than fit in 64 bits");
  expect_invalid(parse(R"({"t": {"dtype": "U8", "shape": [1.5], "data_offsets": [0, 1]}})", 1),
                 "every dimension of \"shape\" must be a non-negative integer, not 1.5");
  expect_invalid(parse(R"({"t": {"dtype": "U8", "shape": [1], "data_offsets": [0]}})", 1),
                 "no \"data_offsets\" array of two integers");
  expect_invalid(parse(R"({"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]},
                          "b": {"dtype": "U8", "shape": [2], "data_offsets": [1, 3]}})", 3),
                 "tensor 'b': its bytes [1, 3) overlap those of 'a', which end at 2");
  expect_invalid(parse(R"({"a": {"dtype": "U8", "shape": [2], "data_offsets": [1, 3]}})", 3),
                 "tensor 'a': the data section has a hole: bytes [0, 1)");
  expect_invalid(parse(R"({"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}})", 1),
                 "tensor 'a': its bytes end at 2, past the data section's 1 bytes");
  expect_invalid(parse(R"({"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}})", 9),
                 "the last 7 bytes of the data section belong to no tensor");
  expect_invalid(parse(R"({"__metadata__": [1]})", 0), "\"__metadata__\" must be an object");
}

class SafetensorsFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("umem-weights-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A file of one U8 tensor "t" of `bytes` bytes, byte i = i * 7 mod 251.
  std::string write(const std::string& name, std::size_t bytes) {
    std::string header = R"({"t": {"dtype": "U8", "shape": [)" + std::to_string(bytes) +
                         R"(], "data_offsets": [0, )" + std::to_string(bytes) + "]}}";
    header.append((8 - header.size() % 8) % 8, ' ');
    std::string out(8, '\0');
    for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
    out += header;
    for (std::size_t i = 0; i < bytes; ++i) out += static_cast<char>(i * 7 % 251);
    const fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary) << out;
    return p.string();
  }

  fs::path dir_;
};

TEST_F(SafetensorsFile, TheDataSectionIsReadByThreadsIntoTheCallersBlockOnce) {
  const std::size_t n = (std::size_t{8} << 20) * 3 + 12345;  // 4 chunks, the last one short
  const std::string path = write("m.safetensors", n);
  for (const bool direct : {false, true}) {
    std::size_t asked = 0;
    int released = 0;
    const loaded_safetensors f = read_safetensors(
        path,
        [&](std::size_t bytes) {
          asked = bytes;
          return std::aligned_alloc(256, (bytes + 255) / 256 * 256);
        },
        [&](void* p) {
          ++released;
          std::free(p);
        },
        read_options{3, direct, {}});
    EXPECT_EQ(f.data_bytes, n);
    EXPECT_EQ(f.block_bytes, asked);
    EXPECT_GE(static_cast<std::byte*>(f.block) + f.block_bytes, f.data + n);
    bool same = true;
    for (std::size_t i = 0; i < n; i += 4093)
      same = same && f.data[i] == static_cast<std::byte>(i * 7 % 251);
    EXPECT_TRUE(same && f.data[n - 1] == static_cast<std::byte>((n - 1) * 7 % 251))
        << "direct_io " << direct;
    EXPECT_EQ(released, 0);
    std::free(f.block);
  }
}

TEST_F(SafetensorsFile, AFileThatIsNotOneNeverReachesTheAllocator) {
  const std::string path = (dir_ / "junk.safetensors").string();
  std::ofstream(path, std::ios::binary) << std::string("\xff\xff\xff\xff\xff\xff\xff\x7f", 8) << "x";
  int allocations = 0;
  expect_invalid(
      [&] {
        (void)read_safetensors(path, [&](std::size_t) -> void* {
          ++allocations;
          return nullptr;
        }, [](void*) {});
      },
      "the header claims 9223372036854775807 bytes, above the format's limit");
  EXPECT_EQ(allocations, 0);
  expect_invalid([&] { (void)read_safetensors_header((dir_ / "none").string()); },
                 "cannot open it: No such file or directory");
}

TEST_F(SafetensorsFile, ACheckpointIsAFileAnIndexOrAFolderHoldingOne) {
  const std::string a = write("a.safetensors", 10);
  EXPECT_EQ(resolve_checkpoint(a).files, std::vector<std::string>{a});
  EXPECT_EQ(resolve_checkpoint(dir_.string()).files, std::vector<std::string>{a});
  const std::string b = write("b.safetensors", 10);
  expect_invalid([&] { (void)resolve_checkpoint(dir_.string()); },
                 "holds 2 .safetensors files and no *.safetensors.index.json");
  std::ofstream(dir_ / "m.safetensors.index.json")
      << R"({"weight_map": {"x": "b.safetensors", "y": "a.safetensors", "z": "b.safetensors"}})";
  const checkpoint c = resolve_checkpoint(dir_.string());
  EXPECT_EQ(c.files, (std::vector<std::string>{b, a})) << "in the order of first appearance";
  EXPECT_EQ(c.weight_map.at("y"), a);
  std::ofstream(dir_ / "m.safetensors.index.json") << R"({"weight_map": {"x": "../b.safetensors"}})";
  expect_invalid([&] { (void)resolve_checkpoint(dir_.string()); },
                 "shard '../b.safetensors' of tensor 'x' must be a file name beside the index");
}

}  // namespace
}  // namespace umem::weights
