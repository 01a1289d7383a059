#include "trace.hpp"

#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "trace_file.hpp"
#include "umem/core/error.hpp"

namespace tr = umem::trace_replay;

namespace {

tr::trace parse(const std::string& text) {
  std::istringstream in(text);
  return tr::parse_trace(in, "t.csv");
}

// The error a malformed trace raises, or "" when it parses.
std::string parse_error_of(const std::string& text) {
  try {
    parse(text);
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), umem::errc::parse_error);
    return e.what();
  }
  return "";
}

}  // namespace

TEST(trace_parser, reads_metadata_events_and_counts) {
  const tr::trace t = parse(
      "# {\"workload\": \"w\", \"cca_peak_reserved_bytes\": 4096}\n"
      "S,-1,2097152,0\n"
      "a,0,1000,0\n"
      "a,1,3000,1\n"
      "# a comment\n"
      "\n"
      "f,0,1000,0\n"
      "e,-1,0,1\n"
      "s,-1,2097152,0\n");
  EXPECT_EQ(t.metadata, "{\"workload\": \"w\", \"cca_peak_reserved_bytes\": 4096}");
  EXPECT_EQ(tr::metadata_number(t, "cca_peak_reserved_bytes"), 4096u);
  EXPECT_EQ(tr::metadata_number(t, "absent"), 0u);
  ASSERT_EQ(t.events.size(), 6u);
  EXPECT_EQ(t.events[1].op, tr::op_kind::alloc);
  EXPECT_EQ(t.events[2].stream, 1u);
  EXPECT_EQ(t.events[3].line, 7u);  // comment and empty line still count
  EXPECT_EQ(t.allocs, 2u);
  EXPECT_EQ(t.frees, 1u);
  EXPECT_EQ(t.segment_allocs, 1u);
  EXPECT_EQ(t.segment_frees, 1u);
  EXPECT_EQ(t.syncs, 1u);
  EXPECT_EQ(t.streams, (std::vector<std::uint32_t>{0, 1}));
  EXPECT_EQ(t.live_at_end, 1u);
  EXPECT_EQ(t.peak_live_bytes, 4000u);
}

TEST(trace_parser, malformed_lines_are_reported_with_their_line_number) {
  const std::string ok = "# {}\na,0,512,0\n";
  struct bad_case {
    std::string line;
    std::string expected;
  };
  const bad_case cases[] = {
      {"a,1,512", "t.csv:3: 3 fields instead of 4"},
      {"a,1,512,0,9", "t.csv:3: more than 4 fields"},
      {"x,1,512,0", "t.csv:3: unknown op 'x'"},
      {"ab,1,512,0", "t.csv:3: op 'ab' is not one letter"},
      {"a,1,12k,0", "t.csv:3: size_bytes '12k' is not a non-negative integer"},
      {"a,1,-5,0", "t.csv:3: size_bytes '-5'"},
      {"a,1,512,", "t.csv:3: stream '' is not"},
      {"a,2,512,0", "t.csv:3: allocation id 2 is not the next dense id 1"},
      {"a,1,0,0", "t.csv:3: allocation of 0 bytes"},
      {"f,7,512,0", "t.csv:3: free of block 7 which was never allocated"},
      {"f,0,1024,0", "t.csv:3: free of block 0 with size 1024 but line 2 allocated it with 512"},
      {"S,4,2097152,0", "t.csv:3: op 'S' must have id -1, not 4"},
      {"e,-1,8,0", "t.csv:3: op 'e' must have size 0"},
      {"a,99999999999999999999,1,0", "t.csv:3: id '99999999999999999999' is not an integer "
                                     "in range"},
  };
  for (const auto& c : cases) {
    const std::string what = parse_error_of(ok + c.line + "\n");
    EXPECT_NE(what.find(c.expected), std::string::npos) << c.line << " -> " << what;
    EXPECT_NE(what.find("'" + c.line + "'"), std::string::npos) << what;  // shows the line
  }
  EXPECT_NE(parse_error_of(ok + "f,0,512,0\nf,0,512,0\n").find("t.csv:4: free of block 0 which "
                                                                "is already freed"),
            std::string::npos);
}

TEST(trace_parser, a_missing_file_is_not_found) {
  try {
    tr::load_trace("/nonexistent/trace.csv.gz");
    FAIL() << "no error";
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), umem::errc::not_found);
  }
}

// The counts of the real GPT-2 trace: README.md's table says 18241 events; its metadata line
// says "live_at_end": 3 and "cca_peak_allocated_bytes": 13614942720.
TEST(trace_parser, reads_the_real_gpt2_trace) {
  const auto path = std::filesystem::path(UMEM_TRACES_DIR) / "trace_gpt2_train.csv.gz";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "needs the real trace " << path;
  const tr::trace t = tr::load_trace(path);
  EXPECT_EQ(t.events.size(), 18241u);
  EXPECT_EQ(t.live_at_end, 3u);
  EXPECT_EQ(tr::metadata_number(t, "cca_peak_allocated_bytes"), 13614942720u);
  EXPECT_EQ(t.streams, std::vector<std::uint32_t>{0});
}
