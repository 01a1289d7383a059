// The drawing of the real 4-socket capture, looked at by a real renderer: rsvg-convert (Debian's
// librsvg2-bin) must turn it into a PNG of the SVG's size, and the labels a reader looks for must
// be in it. Without rsvg-convert the render step skips saying so, except on CI (CI=true).
#include "drawing.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <regex>

#include "capture_model.hpp"
#include "umem/core/error.hpp"

namespace umem::umtopo {
namespace {

namespace fs = std::filesystem;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::uint32_t be32(const std::string& b, std::size_t at) {
  return static_cast<std::uint32_t>(static_cast<unsigned char>(b[at])) << 24 |
         static_cast<std::uint32_t>(static_cast<unsigned char>(b[at + 1])) << 16 |
         static_cast<std::uint32_t>(static_cast<unsigned char>(b[at + 2])) << 8 |
         static_cast<std::uint32_t>(static_cast<unsigned char>(b[at + 3]));
}

TEST(Drawing, FourSocketCaptureHasEveryPartAndItsFindings) {
  UMEM_REQUIRE_MI300A_4SOCKET(topo);
  const std::string svg = render_svg(topo, run_checks(topo));
  for (int i = 0; i < 4; ++i) {
    SCOPED_TRACE(i);
    EXPECT_TRUE(contains(svg, ">Socket, NUMA node " + std::to_string(i) + "<")) << svg;
    EXPECT_TRUE(contains(svg, ">GPU KFD node " + std::to_string(4 + i) + " amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-<"));
  }
  EXPECT_TRUE(contains(svg, ">CPUs 0-23,96-119 (48)<")) << "N:4";
  EXPECT_TRUE(contains(svg, ">memory 125.2 GiB, free ")) << "N:6,7 size and free";
  // R:334 GPU pools, and both errors of the capture marked on the parts they concern.
  EXPECT_TRUE(contains(svg, "GPU-allocatable 94.1 GiB (TTM cap), 75.1%  ! ttm-limit<")) << svg;
  EXPECT_TRUE(contains(svg, "XNACK off, APU yes, PCI 0000:02:00.0  ! xnack-off<")) << svg;
  EXPECT_TRUE(contains(svg, "pools: coarse 94.1 GiB, extended_fine 94.1 GiB, fine 94.1 GiB, group 64 KiB<")) << svg;
  EXPECT_TRUE(contains(svg, ">distance 32<")) << svg;
  EXPECT_FALSE(contains(svg, ">distance ?<")) << "every pair has a distance (N:18-22)";
}

TEST(Drawing, RsvgConvertRendersItAtItsSize) {
  UMEM_REQUIRE_MI300A_4SOCKET(topo);
  if (std::system("command -v rsvg-convert >/dev/null 2>&1") != 0) {
    const char* ci = std::getenv("CI");
    if (ci != nullptr && std::string(ci) == "true") FAIL() << "CI must have rsvg-convert (librsvg2-bin, scripts/install-deps.sh)";
    GTEST_SKIP() << "no rsvg-convert here (Debian: apt-get install librsvg2-bin)";
  }
  const std::string svg = render_svg(topo, run_checks(topo));
  std::smatch m;
  ASSERT_TRUE(std::regex_search(svg, m, std::regex("<svg [^>]*width=\"(\\d+)\" height=\"(\\d+)\""))) << svg;
  const fs::path png = fs::temp_directory_path() / ("umtopo_draw_" + std::to_string(getpid()) + ".png");
  write_drawing(png, svg);  // the same path `umtopo --draw node.png` takes
  std::ifstream in(png, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), {});
  fs::remove(png);
  ASSERT_GT(bytes.size(), 24u);
  EXPECT_EQ(bytes.substr(0, 8), "\x89PNG\r\n\x1a\n");
  EXPECT_EQ(bytes.substr(12, 4), "IHDR");
  EXPECT_EQ(be32(bytes, 16), std::stoul(m[1].str()));
  EXPECT_EQ(be32(bytes, 20), std::stoul(m[2].str()));
  EXPECT_GT(bytes.size(), 20000u) << "a picture with text, not an empty canvas";
}

TEST(Drawing, OnlySvgAndPngAreWritten) {
  EXPECT_THROW(write_drawing("node.pdf", "<svg/>"), umem::error);
}

TEST(Drawing, EmptyModelSaysSo) {
  const std::string svg = render_svg(topology{}, run_checks(topology{}));
  EXPECT_TRUE(contains(svg, "No NUMA node and no agent in the model.")) << svg;
}

}  // namespace
}  // namespace umem::umtopo
