// UMEM_ALLOC_CONF: the options table, the parser's syntax and errors, describe() and limits
// resolved against the real 4-socket MI300A numactl capture.
#include "umem/allocator/alloc_config.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "support/fixtures.hpp"
#include "umem/core/error.hpp"
#include "umem/importers/numactl_importer.hpp"

namespace {

using namespace umem::alloc;
constexpr std::uint64_t KiB = 1ull << 10, MiB = 1ull << 20, GiB = 1ull << 30, TiB = 1ull << 40;

// The message of the umem::error(invalid_argument) that `f` throws; fails the test otherwise.
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), umem::errc::invalid_argument) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no umem::error thrown";
  return {};
}
std::string conf_error(const std::string& text) {
  return error_of([&] { (void)parse_alloc_conf(text); });
}

TEST(AllocConfig, EmptyTextGivesTheDocumentedDefaults) {
  const alloc_options o = parse_alloc_conf("");
  EXPECT_EQ(o.policy.kind, placement_kind::local);
  EXPECT_EQ(o.spill, spill_policy::never);
  EXPECT_EQ(o.kind, umem::coherence::fine);
  EXPECT_TRUE(o.huge_pages);
  EXPECT_EQ(o.populate, populate_mode::none);
  EXPECT_EQ(o.limit_total, std::nullopt);
  EXPECT_TRUE(o.limit_node.empty());
  EXPECT_EQ(o.max_cached, 0u);
  EXPECT_EQ(o, alloc_options{});
  EXPECT_EQ(parse_alloc_conf("  \t "), alloc_options{});
  EXPECT_EQ(parse_alloc_conf(","), alloc_options{});
}

TEST(AllocConfig, FullExampleString) {
  const alloc_options o = parse_alloc_conf(
      "policy:node:1,spill:warn,kind:fine,huge_pages:true,populate:touch,limit.node0:64GiB,"
      "limit.total:0.9,max_cached:8GiB,thread_cache:1MiB");
  EXPECT_EQ(o.policy.kind, placement_kind::node);
  EXPECT_EQ(o.policy.index, 1);
  EXPECT_EQ(o.spill, spill_policy::warn);
  EXPECT_EQ(o.kind, umem::coherence::fine);
  EXPECT_TRUE(o.huge_pages);
  EXPECT_EQ(o.populate, populate_mode::touch);
  ASSERT_EQ(o.limit_node.size(), 1u);
  EXPECT_EQ(o.limit_node.at(0), (memory_limit{64 * GiB, std::nullopt}));
  ASSERT_TRUE(o.limit_total);
  EXPECT_EQ(o.limit_total->fraction, 0.9);
  EXPECT_EQ(o.max_cached, 8 * GiB);
  EXPECT_EQ(o.thread_cache, 1024u * 1024u);
  EXPECT_EQ(parse_alloc_conf("thread_cache:0").thread_cache, 0u);
  EXPECT_FALSE(parse_alloc_conf("expandable_segments:false").expandable_segments);
  EXPECT_TRUE(alloc_options{}.expandable_segments);
  EXPECT_EQ(alloc_options{}.thread_cache, 64u * 1024u * 1024u);
}

TEST(AllocConfig, ValuesSplitOnTheFirstColonAndInterleaveSetsKeepTheirCommas) {
  alloc_options o = parse_alloc_conf("policy:device:2");
  EXPECT_EQ(o.policy.kind, placement_kind::device);
  EXPECT_EQ(o.policy.index, 2);
  o = parse_alloc_conf(" policy : interleave:0,2 , spill:allow,kind:coarse");
  EXPECT_EQ(o.policy.kind, placement_kind::interleave);
  EXPECT_EQ(o.policy.nodes, (std::vector<int>{0, 2}));
  EXPECT_EQ(o.spill, spill_policy::allow);
  EXPECT_EQ(o.kind, umem::coherence::coarse);
  o = parse_alloc_conf("kind:extended_fine,huge_pages:false,populate:map_populate,");
  EXPECT_EQ(o.kind, umem::coherence::extended_fine);
  EXPECT_FALSE(o.huge_pages);
  EXPECT_EQ(o.populate, populate_mode::map_populate);
}

TEST(AllocConfig, SizesTakeBinaryUnits) {
  const auto cached = [](const std::string& v) {
    return parse_alloc_conf("max_cached:" + v).max_cached;
  };
  EXPECT_EQ(cached("4096B"), 4096u);
  EXPECT_EQ(cached("4KiB"), 4 * KiB);
  EXPECT_EQ(cached("3MiB"), 3 * MiB);
  EXPECT_EQ(cached("1.5GiB"), 3 * GiB / 2);
  EXPECT_EQ(cached("2TiB"), 2 * TiB);
  EXPECT_EQ(cached("64 gib"), 64 * GiB);  // units are case-insensitive, a space is allowed
  EXPECT_EQ(cached("0"), 0u);             // no cap
  EXPECT_EQ(cached("1.0000000001KiB"), KiB);  // fractional bytes round down
}

TEST(AllocConfig, LimitsAreSizesOrFractions) {
  const alloc_options o =
      parse_alloc_conf("limit.node0:0.5,limit.node3:1,limit.node12:512MiB,limit.total:400GiB");
  EXPECT_EQ(o.limit_node.at(0), (memory_limit{0, 0.5}));
  EXPECT_EQ(o.limit_node.at(3), (memory_limit{0, 1.0}));  // a bare 1 is all of it, never 1 byte
  EXPECT_EQ(o.limit_node.at(12), (memory_limit{512 * MiB, std::nullopt}));
  EXPECT_EQ(o.limit_total, (memory_limit{400 * GiB, std::nullopt}));
}

TEST(AllocConfig, TextAppliesOnTopOfABase) {
  alloc_options base;
  base.kind = umem::coherence::coarse;
  base.limit_node[1] = {GiB, std::nullopt};
  base.limit_node[2] = {2 * GiB, std::nullopt};
  base.limit_total = memory_limit{0, 0.5};
  const alloc_options o =
      parse_alloc_conf("spill:warn,limit.node1:none,limit.node2:3GiB,limit.total:none", base);
  EXPECT_EQ(o.kind, umem::coherence::coarse);  // untouched
  EXPECT_EQ(o.spill, spill_policy::warn);
  EXPECT_EQ(o.limit_node.count(1), 0u);
  EXPECT_EQ(o.limit_node.at(2).bytes, 3 * GiB);
  EXPECT_EQ(o.limit_total, std::nullopt);
}

TEST(AllocConfig, UnknownKeyNamesItAndListsTheKnownOnes) {
  EXPECT_EQ(conf_error("polcy:local"),
            "UMEM_ALLOC_CONF: unknown key 'polcy' (known: policy, spill, kind, device_kind, "
            "huge_pages, populate, limit.total, limit.node<N>, limit.device<D>, max_cached, "
            "expandable_segments, thread_cache, foreign_alias_min)");
  EXPECT_EQ(conf_error("spill:warn,Kind:fine").find("UMEM_ALLOC_CONF: unknown key 'Kind'"), 0u);
  EXPECT_NE(conf_error("limit.nodes:1GiB").find("'limit.nodes' needs a NUMA node number"),
            std::string::npos);
  EXPECT_NE(conf_error("limit.node-1:1GiB").find("needs a NUMA node number"), std::string::npos);
}

TEST(AllocConfig, BadValuesNameTheKeyAndWhatIsAccepted) {
  EXPECT_EQ(conf_error("limit.node0:12 parsecs"),
            "UMEM_ALLOC_CONF: limit.node0: '12 parsecs' is not a size (use e.g. 64GiB or 0.5; "
            "units are B, KiB, MiB, GiB, TiB: powers of 1024)");
  EXPECT_EQ(conf_error("limit.total:lots"),
            "UMEM_ALLOC_CONF: limit.total: 'lots' is not a size (use e.g. 64GiB or 0.5)");
  EXPECT_EQ(conf_error("kind:medium"),
            "UMEM_ALLOC_CONF: kind: 'medium' is not one of fine, coarse, extended_fine");
  EXPECT_EQ(conf_error("huge_pages:yes"),
            "UMEM_ALLOC_CONF: huge_pages: 'yes' is not one of true, false");
  EXPECT_EQ(conf_error("kind:"), "UMEM_ALLOC_CONF: kind: '' is not one of fine, coarse, "
                                 "extended_fine");
  // GB is a decimal unit: rejected, not guessed.
  EXPECT_NE(conf_error("max_cached:8GB").find("max_cached: '8GB' is not a size"),
            std::string::npos);
  // A bare number is a fraction for limits and needs a unit for sizes.
  EXPECT_NE(conf_error("limit.node0:1024").find("limit.node0: '1024' is not a fraction 0 < f <= 1"),
            std::string::npos);
  EXPECT_NE(conf_error("limit.node0:0").find("is not a fraction 0 < f <= 1"), std::string::npos);
  EXPECT_NE(conf_error("limit.node0:0GiB").find("limit.node0: '0GiB' is zero"), std::string::npos);
  EXPECT_NE(conf_error("max_cached:1024").find("max_cached: '1024' is a bare number; sizes need a "
                                               "unit"),
            std::string::npos);
  EXPECT_NE(conf_error("max_cached:-1GiB").find("max_cached: '-1GiB' is not a size"),
            std::string::npos);
  EXPECT_EQ(conf_error("max_cached:99999999TiB"),
            "UMEM_ALLOC_CONF: max_cached: '99999999TiB' is too large");
}

TEST(AllocConfig, PolicySpillAndPopulateErrorsComeFromThePlacementParserWithTheKey) {
  const std::string policy = conf_error("policy:node:x");
  EXPECT_EQ(policy.find("UMEM_ALLOC_CONF: policy: "), 0u) << policy;
  EXPECT_NE(policy.find("node:x"), std::string::npos) << policy;
  const std::string spill = conf_error("spill:sometimes");
  EXPECT_EQ(spill.find("UMEM_ALLOC_CONF: spill: "), 0u) << spill;
  EXPECT_NE(spill.find("sometimes"), std::string::npos) << spill;
  const std::string populate = conf_error("populate:eager");
  EXPECT_EQ(populate.find("UMEM_ALLOC_CONF: populate: "), 0u) << populate;
  EXPECT_NE(populate.find("eager"), std::string::npos) << populate;
}

TEST(AllocConfig, DuplicateKeysAndItemsWithoutValueAreErrors) {
  EXPECT_EQ(conf_error("spill:warn,kind:fine,spill:never"),
            "UMEM_ALLOC_CONF: key 'spill' is given more than once; give each key once");
  EXPECT_EQ(conf_error("limit.node1:1GiB,limit.node01:2GiB"),
            "UMEM_ALLOC_CONF: key 'limit.node1' is given more than once; give each key once");
  EXPECT_EQ(conf_error("spill:warn,huge_pages"),
            "UMEM_ALLOC_CONF: 'huge_pages' is not key:value (known keys: policy, spill, kind, "
            "device_kind, huge_pages, populate, limit.total, limit.node<N>, limit.device<D>, "
            "max_cached, expandable_segments, thread_cache, foreign_alias_min)");
  EXPECT_NE(conf_error("local").find("'local' is not key:value"), std::string::npos);
}

TEST(AllocConfig, DescribeListsEveryValueAndParsesBack) {
  EXPECT_EQ(describe(alloc_options{}),
            "policy:local,spill:never,kind:fine,device_kind:coarse,huge_pages:true,populate:none,"
            "limit.total:none,max_cached:0,expandable_segments:true,thread_cache:64MiB,"
            "foreign_alias_min:4MiB");
  alloc_options o;
  o.policy.kind = placement_kind::interleave;
  o.policy.nodes = {0, 1, 3};
  o.spill = spill_policy::warn;
  o.kind = umem::coherence::extended_fine;
  o.device_kind = umem::coherence::fine;
  o.huge_pages = false;
  o.populate = populate_mode::touch;
  o.limit_total = memory_limit{0, 0.9};
  o.limit_node[0] = {64 * GiB, std::nullopt};
  o.limit_node[2] = {0, 0.00001};
  o.limit_node[3] = {12345, std::nullopt};
  o.max_cached = 3 * GiB / 2;
  o.foreign_alias_min = 0;
  const std::string text = describe(o);
  EXPECT_EQ(text,
            "policy:interleave:0-1,3,spill:warn,kind:extended_fine,device_kind:fine,"
            "huge_pages:false,"
            "populate:touch,limit.total:0.9,limit.node0:64GiB,limit.node2:0.00001,"
            "limit.node3:12345B,max_cached:1536MiB,expandable_segments:true,"
            "thread_cache:64MiB,foreign_alias_min:0");
  EXPECT_EQ(parse_alloc_conf(text), o);
}

// A fraction far below one byte of any node is still one the parser accepts, so describe() must
// write all its digits (fixed notation, no exponent) and read back to the same value: the fuzzer
// found 4.1e-74, whose 90 characters overflowed a 64-character buffer.
TEST(AllocConfig, DescribeWritesTinyFractionsThatReadBack) {
  for (const double f : {4.099276460824344750e-74, std::numeric_limits<double>::denorm_min()}) {
    alloc_options o;
    o.limit_node[0] = {0, f};
    const std::string text = describe(o);
    const alloc_options back = parse_alloc_conf(text);
    EXPECT_EQ(back, o) << text;
    ASSERT_TRUE(back.limit_node.at(0).fraction.has_value()) << text;
    EXPECT_EQ(*back.limit_node.at(0).fraction, f) << text;
  }
}

TEST(AllocConfig, TableDocumentsEveryKeyWithTheStructDefaults) {
  const auto table = alloc_option_table();
  std::vector<std::string> keys;
  for (const auto& row : table) {
    keys.emplace_back(row.key);
    EXPECT_FALSE(row.type.empty()) << row.key;
    EXPECT_GT(row.doc.size(), 20u) << row.key;
  }
  EXPECT_EQ(keys, (std::vector<std::string>{"policy", "spill", "kind", "device_kind",
                                            "huge_pages", "populate",
                                            "limit.total", "limit.node<N>", "limit.device<D>",
                                            "max_cached", "expandable_segments",
                                            "thread_cache", "foreign_alias_min"}));
  // Each default as documented is what describe() prints for alloc_options{}, and parses back.
  const std::string defaults = "," + describe(alloc_options{}) + ",";
  for (const auto& row : table) {
    if (row.key == "limit.node<N>" || row.key == "limit.device<D>") {
      EXPECT_EQ(row.default_value, "none");  // no limit: describe() lists none
      EXPECT_EQ(parse_alloc_conf("limit.node0:none,limit.device0:none"), alloc_options{});
      continue;
    }
    const std::string item = std::string(row.key) + ":" + std::string(row.default_value);
    EXPECT_NE(defaults.find("," + item + ","), std::string::npos) << item;
    EXPECT_EQ(parse_alloc_conf(item), alloc_options{}) << item;
  }
}

TEST(AllocConfig, DeviceLimitsParseDescribeAndReject) {
  const alloc_options o = parse_alloc_conf("limit.device1:100GiB,limit.device0:0.5");
  EXPECT_EQ(o.limit_device.at(1).bytes, 100 * GiB);
  EXPECT_EQ(o.limit_device.at(0).fraction, 0.5);
  EXPECT_TRUE(o.limit_node.empty());
  const std::string text = describe(o);
  EXPECT_NE(text.find(",limit.device0:0.5,limit.device1:100GiB,"), std::string::npos) << text;
  EXPECT_EQ(parse_alloc_conf(text), o);
  EXPECT_EQ(parse_alloc_conf("limit.device1:none", o).limit_device.count(1), 0u);
  EXPECT_EQ(conf_error("limit.device:1GiB"),
            "UMEM_ALLOC_CONF: 'limit.device' needs a GPU index after limit.device (e.g. "
            "limit.device0:100GiB)");
  EXPECT_EQ(conf_error("limit.device2:1GiB,limit.device02:2GiB"),
            "UMEM_ALLOC_CONF: key 'limit.device2' is given more than once; give each key once");
  EXPECT_EQ(limit_bytes_of(o.limit_device.at(0), 1001), 500u);  // fractions round down
  EXPECT_EQ(limit_bytes_of(o.limit_device.at(1), 1), 100 * GiB);
}

TEST(AllocConfig, OptionsFromEnvironmentReadUmemAllocConf) {
  const char* old = std::getenv("UMEM_ALLOC_CONF");
  const std::string saved = old != nullptr ? old : "";
  unsetenv("UMEM_ALLOC_CONF");
  EXPECT_EQ(options_from_environment(), alloc_options{});
  setenv("UMEM_ALLOC_CONF", "spill:allow,max_cached:1GiB", 1);
  const alloc_options o = options_from_environment();
  EXPECT_EQ(o.spill, spill_policy::allow);
  EXPECT_EQ(o.max_cached, GiB);
  setenv("UMEM_ALLOC_CONF", "spil:allow", 1);
  EXPECT_EQ(error_of([] { (void)options_from_environment(); }).find("UMEM_ALLOC_CONF: unknown key "
                                                                    "'spil'"),
            0u);
  if (old != nullptr)
    setenv("UMEM_ALLOC_CONF", saved.c_str(), 1);
  else
    unsetenv("UMEM_ALLOC_CONF");
}

class AllocLimits : public ::testing::Test {
 protected:
  void SetUp() override {
    UMEM_REQUIRE_FIXTURE(path, "numactl_mi300a_4socket_mzank_gpu-benchmarks-hip.txt");
    numa_ = umem::importers::import_numactl(umem::test::read_text(path), path.string()).numa;
  }
  umem::numa_topology numa_;
};

TEST_F(AllocLimits, FractionsResolveAgainstTheCapturedNodeSizes) {
  // Capture lines 5, 8, 11, 14: node sizes 128193, 128719, 128719, 128661 MB (MiB: bytes >> 20);
  // 514292 MiB in all.
  const alloc_options o =
      parse_alloc_conf("limit.node0:0.5,limit.node3:0.25,limit.node1:64GiB,limit.total:0.9");
  const resolved_limits r = resolve_limits(o, numa_);
  EXPECT_EQ(r.node_bytes.at(0), 128193 * MiB / 2);
  EXPECT_EQ(r.node_bytes.at(3), 128661 * MiB / 4);
  EXPECT_EQ(r.node_bytes.at(1), 64 * GiB);
  EXPECT_EQ(r.node_bytes.count(2), 0u);
  // 0.9 x 539274248192 B = 485346823372.8 B, rounded down.
  EXPECT_EQ(r.total_bytes, 485346823372u);
  EXPECT_EQ(resolve_limits(alloc_options{}, numa_), resolved_limits{});
}

TEST_F(AllocLimits, UnknownNodesAndUnknownSizesAreErrors) {
  EXPECT_EQ(error_of([&] { (void)resolve_limits(parse_alloc_conf("limit.node4:1GiB"), numa_); }),
            "UMEM_ALLOC_CONF: limit.node4: this machine has no NUMA node 4 (its nodes: 0, 1, 2, "
            "3)");
  const umem::numa_topology none;
  EXPECT_NE(error_of([&] { (void)resolve_limits(parse_alloc_conf("limit.total:0.5"), none); })
                .find("limit.total: the fraction 0.5 needs the machine's memory size"),
            std::string::npos);
  // A size needs no memory size, but a node limit still needs the node.
  EXPECT_EQ(resolve_limits(parse_alloc_conf("limit.total:1GiB"), none).total_bytes, GiB);
  umem::numa_topology unsized = numa_;
  unsized.nodes[2].memory_total_bytes = 0;
  EXPECT_NE(error_of([&] { (void)resolve_limits(parse_alloc_conf("limit.node2:0.5"), unsized); })
                .find("limit.node2: the fraction 0.5 needs node 2's memory size"),
            std::string::npos);
}

}  // namespace
