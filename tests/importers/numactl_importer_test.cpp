// numactl --hardware import against the real 4-socket MI300A capture and broken variants.
#include "umem/importers/numactl_importer.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "support/fixtures.hpp"
#include "umem/core/error.hpp"

namespace umem::importers {
namespace {

using ::testing::HasSubstr;

constexpr std::uint64_t MiB = 1024 * 1024;
constexpr const char* mi300a_numactl = "numactl_mi300a_4socket_mzank_gpu-benchmarks-hip.txt";

template <typename F>
std::string parse_error_of(F&& f) {
  try {
    f();
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), errc::parse_error) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "expected umem::error(parse_error)";
  return {};
}

std::vector<unsigned> range(unsigned first, unsigned last) {
  std::vector<unsigned> out;
  for (unsigned c = first; c <= last; ++c) out.push_back(c);
  return out;
}

TEST(NumactlImporter, FourSocketMi300a) {
  UMEM_REQUIRE_FIXTURE(path, mi300a_numactl);
  const auto imp = import_numactl(test::read_text(path), "numactl.txt");
  EXPECT_TRUE(imp.unrecognized.empty());
  const auto& nodes = imp.numa.nodes;
  ASSERT_EQ(nodes.size(), 4u);  // line 3 "available: 4 nodes (0-3)"
  // Lines 4-15: each node has 24 cores + their 24 SMT siblings 96 further on.
  const std::uint64_t size_mb[] = {128193, 128719, 128719, 128661};
  const std::uint64_t free_mb[] = {126397, 127384, 126290, 127346};
  for (unsigned i = 0; i < 4; ++i) {
    SCOPED_TRACE("node " + std::to_string(i));
    EXPECT_EQ(nodes[i].os_index, static_cast<int>(i));
    auto cpus = range(24 * i, 24 * i + 23);
    const auto smt = range(96 + 24 * i, 96 + 24 * i + 23);
    cpus.insert(cpus.end(), smt.begin(), smt.end());
    EXPECT_EQ(nodes[i].cpus, cpus);
    EXPECT_EQ(nodes[i].cpus.size(), 48u);
    EXPECT_EQ(nodes[i].memory_total_bytes, size_mb[i] * MiB);
    EXPECT_EQ(nodes[i].memory_free_bytes, free_mb[i] * MiB);
    EXPECT_EQ(nodes[i].package, std::nullopt);
  }
  // Lines 16-21: 10 on the diagonal, 32 elsewhere.
  ASSERT_EQ(imp.numa.distances.size(), 4u);
  for (unsigned i = 0; i < 4; ++i)
    for (unsigned j = 0; j < 4; ++j) EXPECT_EQ(imp.numa.distances[i][j], i == j ? 10u : 32u);
}

const std::string small_dump =
    "$ numactl --hardware\n"      // 1
    "available: 2 nodes (0-1)\n"  // 2
    "node 0 cpus: 0 1 4 5\n"      // 3
    "node 0 size: 1000 MB\n"      // 4
    "node 0 free: 900 MB\n"       // 5
    "node 1 cpus: 2 3 6 7\n"      // 6
    "node 1 size: 2000 MB\n"      // 7
    "node 1 free: 1900 MB\n"      // 8
    "node distances:\n"           // 9
    "node   0   1 \n"             // 10
    "  0:  10  21 \n"             // 11
    "  1:  21  10 \n";            // 12

std::string with_line(int number, const std::string& replacement) {
  std::string out;
  int n = 0;
  std::size_t pos = 0;
  while (pos < small_dump.size()) {
    const std::size_t end = small_dump.find('\n', pos) + 1;
    if (++n == number)
      out += replacement;
    else
      out += small_dump.substr(pos, end - pos);
    pos = end;
  }
  return out;
}

TEST(NumactlImporterMalformed, SmallDumpIsValid) {
  const auto imp = import_numactl("# Source: test\n" + small_dump, "t.txt");
  EXPECT_TRUE(imp.unrecognized.empty());
  ASSERT_EQ(imp.numa.nodes.size(), 2u);
  EXPECT_EQ(imp.numa.nodes[1].cpus, (std::vector<unsigned>{2, 3, 6, 7}));
  EXPECT_EQ(imp.numa.distances, (std::vector<std::vector<std::uint32_t>>{{10, 21}, {21, 10}}));
}

TEST(NumactlImporterMalformed, NonSquareRow) {
  const auto msg =
      parse_error_of([] { import_numactl(with_line(11, "  0:  10  21  21\n"), "t.txt"); });
  EXPECT_THAT(msg, HasSubstr("t.txt:11:"));
  EXPECT_THAT(msg, HasSubstr("not square"));
}

TEST(NumactlImporterMalformed, ExtraRow) {
  const auto msg = parse_error_of([] { import_numactl(small_dump + "  2:  21  21\n", "t.txt"); });
  EXPECT_THAT(msg, HasSubstr("t.txt:13:"));
}

TEST(NumactlImporterMalformed, MissingRowIsACutCapture) {
  const auto msg = parse_error_of([] { import_numactl(with_line(12, ""), "t.txt"); });
  EXPECT_THAT(msg, HasSubstr("t.txt:9:"));  // "node distances:"
  EXPECT_THAT(msg, HasSubstr("1 rows for 2 nodes"));
}

TEST(NumactlImporterMalformed, HeaderMustNameTheNodes) {
  const auto msg = parse_error_of([] { import_numactl(with_line(10, "node   0   2\n"), "t.txt"); });
  EXPECT_THAT(msg, HasSubstr("t.txt:10:"));
}

TEST(NumactlImporterMalformed, RowLabelsMustFollowTheNodes) {
  const auto msg = parse_error_of([] { import_numactl(with_line(12, "  0:  21  10\n"), "t.txt"); });
  EXPECT_THAT(msg, HasSubstr("t.txt:12:"));
}

TEST(NumactlImporterMalformed, Diagonal) {
  const auto msg = parse_error_of([] { import_numactl(with_line(12, "  1:  21  11\n"), "t.txt"); });
  EXPECT_THAT(msg, HasSubstr("t.txt:12:"));
  EXPECT_THAT(msg, HasSubstr("itself"));
  EXPECT_THAT(parse_error_of([] { import_numactl(with_line(11, "  0:  10  9\n"), "t.txt"); }),
              HasSubstr("t.txt:11:"));
}

TEST(NumactlImporterMalformed, NodeCountMismatch) {
  const auto msg =
      parse_error_of([] { import_numactl(with_line(2, "available: 3 nodes (0-1)\n"), "t.txt"); });
  EXPECT_THAT(msg, HasSubstr("t.txt:2:"));
}

TEST(NumactlImporterMalformed, NodeNotAvailable) {
  const auto msg =
      parse_error_of([] { import_numactl(with_line(6, "node 5 cpus: 2 3 6 7\n"), "t.txt"); });
  EXPECT_THAT(msg, HasSubstr("t.txt:6:"));
}

TEST(NumactlImporterMalformed, BadNumbers) {
  EXPECT_THAT(
      parse_error_of([] { import_numactl(with_line(7, "node 1 size: 20x0 MB\n"), "t.txt"); }),
      HasSubstr("t.txt:7:"));
  EXPECT_THAT(
      parse_error_of([] { import_numactl(with_line(7, "node 1 size: 2000 GB\n"), "t.txt"); }),
      HasSubstr("t.txt:7:"));
  EXPECT_THAT(parse_error_of([] { import_numactl(with_line(6, "node 1 cpus: 2 3 x\n"), "t.txt"); }),
              HasSubstr("t.txt:6:"));
  EXPECT_THAT(parse_error_of([] { import_numactl(with_line(11, "  0:  10  2l\n"), "t.txt"); }),
              HasSubstr("t.txt:11:"));
}

TEST(NumactlImporterMalformed, CpuInTwoNodes) {
  const auto msg =
      parse_error_of([] { import_numactl(with_line(6, "node 1 cpus: 2 3 5\n"), "t.txt"); });
  EXPECT_THAT(msg, HasSubstr("t.txt:6:"));
  EXPECT_THAT(msg, HasSubstr("CPU 5"));
}

TEST(NumactlImporterMalformed, MissingSizeIsACutCapture) {
  const auto msg = parse_error_of([] { import_numactl(with_line(7, ""), "t.txt"); });
  EXPECT_THAT(msg, HasSubstr("t.txt:2:"));
  EXPECT_THAT(msg, HasSubstr("node 1 has no 'size:'"));
}

TEST(NumactlImporterMalformed, UnknownLinesAreReported) {
  const auto imp =
      import_numactl(with_line(5, "node 0 free: 900 MB\nnode 0 hugepages: 4\nbanana\n"), "t.txt");
  ASSERT_EQ(imp.unrecognized.size(), 2u);
  EXPECT_EQ(imp.unrecognized[0].line, 6);
  EXPECT_EQ(imp.unrecognized[0].text, "node 0 hugepages: 4");
  EXPECT_EQ(imp.unrecognized[1].line, 7);
  EXPECT_EQ(imp.numa.nodes.size(), 2u);
}

TEST(NumactlImporterMalformed, NumactlsOwnGaps) {
  // numactl prints "<not available>" when the kernel gives no size, and a note instead of the
  // matrix when there are no distances; a node may have no CPUs.
  std::string text = with_line(5, "node 0 free: <not available>\n");
  text = text.substr(0, text.find("node distances:")) + "No distance information available.\n";
  text = text.replace(text.find("node 1 cpus: 2 3 6 7"), 20, "node 1 cpus:");
  const auto imp = import_numactl(text, "t.txt");
  EXPECT_EQ(imp.numa.nodes.at(0).memory_free_bytes, std::nullopt);
  EXPECT_TRUE(imp.numa.nodes.at(1).cpus.empty());
  EXPECT_TRUE(imp.numa.distances.empty());
  EXPECT_THAT(parse_error_of(
                  [&] { import_numactl(with_line(4, "node 0 size: <not available>\n"), "t.txt"); }),
              HasSubstr("t.txt:4:"));
}

TEST(NumactlImporterMalformed, SparseNodeIds) {
  const std::string text =
      "available: 2 nodes (0,2)\nnode 0 cpus: 0\nnode 0 size: 10 MB\nnode 2 cpus: 1\n"
      "node 2 size: 10 MB\nnode distances:\nnode 0 2\n0: 10 20\n2: 20 10\n";
  const auto imp = import_numactl(text, "t.txt");
  ASSERT_EQ(imp.numa.nodes.size(), 2u);
  EXPECT_EQ(imp.numa.nodes[1].os_index, 2);
}

TEST(NumactlImporterMalformed, EmptyOrNotNumactl) {
  EXPECT_THAT(parse_error_of([] { import_numactl("", "e.txt"); }), HasSubstr("e.txt: empty"));
  EXPECT_THAT(parse_error_of([] { import_numactl("hello\n", "e.txt"); }),
              HasSubstr("no 'available:"));
  EXPECT_THAT(parse_error_of([] { import_numactl("No NUMA available on this system\n", "e.txt"); }),
              HasSubstr("e.txt:1:"));
}

}  // namespace
}  // namespace umem::importers
