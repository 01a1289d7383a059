#include "drawing.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "report.hpp"
#include "report_text.hpp"
#include "umem/core/apu_view.hpp"
#include "umem/core/detail/text.hpp"
#include "umem/core/error.hpp"

namespace umem::umtopo {
namespace {

using umem::detail::format_id_ranges;
using umem::detail::join;

constexpr int kBoxW = 600, kGap = 130, kMargin = 30, kTitleH = 60, kLine = 18;
constexpr const char* kError = "#c62828";
constexpr const char* kWarning = "#ef8f00";

std::string xml(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

const finding* problem(const std::vector<finding>& findings, const std::string& id) {
  for (const auto& f : findings)
    if (f.id == id && f.level != severity::info) return &f;
  return nullptr;
}

const char* colour(const finding& f) { return f.level == severity::error ? kError : kWarning; }

// A box's text lines, each with an optional finding that colours it.
struct line {
  std::string text;
  const finding* mark = nullptr;
  int indent = 0;
};

std::vector<line> socket_lines(const apu_socket& s, const std::vector<finding>& findings) {
  std::vector<line> l;
  if (s.numa != nullptr)
    l.push_back({"CPUs " + (s.numa->cpus.empty() ? std::string("none") : format_id_ranges(s.numa->cpus)) + " (" +
                 std::to_string(s.numa->cpus.size()) + ")"});
  std::string mem = "memory " + (s.socket_memory_bytes ? format_gib(s.socket_memory_bytes) : std::string("unknown"));
  if (s.numa != nullptr && s.numa->memory_free_bytes) mem += ", free " + format_gib(*s.numa->memory_free_bytes);
  l.push_back({mem});
  if (!s.gpu_agents.empty()) {
    std::string alloc = "GPU-allocatable " + format_gib(s.gpu_allocatable_bytes) + " (TTM cap)";
    if (s.socket_memory_bytes) alloc += ", " + percent(s.gpu_allocatable_bytes, s.socket_memory_bytes);
    const finding* ttm = problem(findings, "ttm-limit");
    l.push_back({alloc + (ttm ? "  ! ttm-limit" : ""), ttm});
  }
  for (const agent* c : s.cpu_agents)
    l.push_back({"CPU agent " + agent_label(*c) + ": " + std::to_string(c->compute_units) + " compute units"});
  const finding* xnack = problem(findings, "xnack-off");
  const finding* unplaced = s.numa_node < 0 ? problem(findings, "gpu-not-local") : nullptr;
  for (const agent* g : s.gpu_agents) {
    const auto x = g->isa_xnack();
    std::string head = "GPU " + agent_label(*g) + " " + (g->isas.empty() ? g->name : g->isas.front());
    std::string props = std::string("XNACK ") + (x ? (*x ? "on" : "off") : "unknown") + ", APU " +
                        (g->is_apu ? (*g->is_apu ? "yes" : "no") : "unknown") + ", PCI " + g->pci_address();
    l.push_back({head + (unplaced ? "  ! gpu-not-local" : ""), unplaced});
    l.push_back({props + (xnack && x == false ? "  ! xnack-off" : ""), x == false ? xnack : nullptr, 1});
    std::vector<std::string> pools;
    for (const auto& p : g->pools)
      pools.push_back(coherence_text(p) == "-" ? "group " + format_exact_bytes(p.size_bytes)
                                               : coherence_text(p) + " " + format_gib(p.size_bytes));
    if (!pools.empty()) l.push_back({"pools: " + join(pools, ", "), nullptr, 1});
  }
  return l;
}

struct placed {
  int x, y, h;
};

}  // namespace

std::string render_svg(const topology& topo, const std::vector<finding>& findings) {
  const auto sockets = apu_sockets(topo);
  const int n = static_cast<int>(sockets.size());
  const int cols = std::max(1, static_cast<int>(std::ceil(std::sqrt(static_cast<double>(n)))));
  std::vector<std::vector<line>> texts;
  int box_h = 0;
  for (const auto& s : sockets) {
    texts.push_back(socket_lines(s, findings));
    box_h = std::max(box_h, 40 + kLine * static_cast<int>(texts.back().size()));
  }
  std::vector<const finding*> node_wide;
  for (const auto& f : findings)
    if (f.level != severity::info && f.id != "ttm-limit" && f.id != "xnack-off" && f.id != "gpu-not-local")
      node_wide.push_back(&f);

  const int rows = (n + cols - 1) / cols;
  const int width = 2 * kMargin + cols * kBoxW + (cols - 1) * kGap;
  const int grid_h = rows * box_h + std::max(0, rows - 1) * kGap;
  const int notes_h = node_wide.empty() ? 0 : 30 + kLine * static_cast<int>(node_wide.size());
  const int height = kTitleH + grid_h + (notes_h ? notes_h + kMargin : 0) + kMargin + (n == 0 ? 40 : 0);

  std::ostringstream svg;
  svg << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      << "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"" << width << "\" height=\"" << height
      << "\" viewBox=\"0 0 " << width << " " << height << "\" font-family=\"DejaVu Sans, sans-serif\" font-size=\"13\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n"
      << "<text x=\"" << kMargin << "\" y=\"32\" font-size=\"18\" font-weight=\"bold\">" << xml(headline(topo))
      << "</text>\n";
  if (n == 0)
    svg << "<text x=\"" << kMargin << "\" y=\"" << kTitleH + 10 << "\">No NUMA node and no agent in the model.</text>\n";

  std::vector<placed> at;
  for (int i = 0; i < n; ++i)
    at.push_back({kMargin + (i % cols) * (kBoxW + kGap), kTitleH + (i / cols) * (box_h + kGap), box_h});

  // Links first, under the boxes: every pair of NUMA nodes, labelled with its distance.
  const auto& numa = topo.numa;
  for (int i = 0; i < n; ++i)
    for (int j = i + 1; j < n; ++j) {
      const int a = sockets[i].numa_node, b = sockets[j].numa_node;
      if (a < 0 || b < 0) continue;
      std::optional<std::uint32_t> d;
      for (std::size_t r = 0; r < numa.nodes.size() && r < numa.distances.size(); ++r)
        for (std::size_t c = 0; c < numa.nodes.size() && c < numa.distances[r].size(); ++c)
          if (numa.nodes[r].os_index == a && numa.nodes[c].os_index == b) d = numa.distances[r][c];
      const int x1 = at[i].x + kBoxW / 2, y1 = at[i].y + box_h / 2, x2 = at[j].x + kBoxW / 2, y2 = at[j].y + box_h / 2;
      // A diagonal's label off the midpoint, so the two diagonals of a 2x2 grid keep theirs apart.
      const bool diagonal = x1 != x2 && y1 != y2;
      const int lx = x1 + (x2 - x1) * (diagonal ? 2 : 1) / (diagonal ? 5 : 2);
      const int ly = y1 + (y2 - y1) * (diagonal ? 2 : 1) / (diagonal ? 5 : 2);
      svg << "<line x1=\"" << x1 << "\" y1=\"" << y1 << "\" x2=\"" << x2 << "\" y2=\"" << y2
          << "\" stroke=\"#7a7a7a\" stroke-width=\"2\"/>\n"
          << "<rect x=\"" << lx - 52 << "\" y=\"" << ly - 12 << "\" width=\"104\" height=\"18\" fill=\"#ffffff\"/>\n"
          << "<text x=\"" << lx << "\" y=\"" << ly + 2 << "\" text-anchor=\"middle\" fill=\"#444444\">distance "
          << (d ? std::to_string(*d) : std::string("?")) << "</text>\n";
    }

  for (int i = 0; i < n; ++i) {
    const auto& s = sockets[i];
    const std::string title = s.numa_node >= 0 ? "Socket, NUMA node " + std::to_string(s.numa_node) : "Agents without a NUMA node";
    svg << "<rect x=\"" << at[i].x << "\" y=\"" << at[i].y << "\" width=\"" << kBoxW << "\" height=\"" << box_h
        << "\" rx=\"6\" fill=\"#eef3fb\" stroke=\"#35598f\" stroke-width=\"2\"/>\n"
        << "<text x=\"" << at[i].x + 12 << "\" y=\"" << at[i].y + 24 << "\" font-size=\"15\" font-weight=\"bold\">"
        << xml(title) << "</text>\n";
    int y = at[i].y + 24 + kLine + 4;
    for (const line& l : texts[i]) {
      svg << "<text x=\"" << at[i].x + 12 + 16 * l.indent << "\" y=\"" << y << "\"";
      if (l.mark) svg << " fill=\"" << colour(*l.mark) << "\" font-weight=\"bold\"";
      svg << ">" << xml(l.text) << "</text>\n";
      y += kLine;
    }
  }

  if (!node_wide.empty()) {
    const int y0 = kTitleH + grid_h + kMargin;
    svg << "<rect x=\"" << kMargin << "\" y=\"" << y0 << "\" width=\"" << width - 2 * kMargin << "\" height=\"" << notes_h
        << "\" rx=\"6\" fill=\"#fff8e6\" stroke=\"" << kWarning << "\" stroke-width=\"2\"/>\n"
        << "<text x=\"" << kMargin + 12 << "\" y=\"" << y0 + 20 << "\" font-weight=\"bold\">Node (umtopo check)</text>\n";
    int y = y0 + 20 + kLine;
    for (const finding* f : node_wide) {
      svg << "<text x=\"" << kMargin + 12 << "\" y=\"" << y << "\" fill=\"" << colour(*f) << "\">! " << xml(f->id) << ": "
          << xml(f->title) << "</text>\n";
      y += kLine;
    }
  }
  svg << "</svg>\n";
  return svg.str();
}

void write_drawing(const std::filesystem::path& file, const std::string& svg) {
  const std::string ext = file.extension().string();
  if (ext != ".svg" && ext != ".png")
    throw_error(errc::invalid_argument, "--draw " + file.string() + ": the file must end in .svg or .png");
  const std::filesystem::path svg_file = ext == ".svg" ? file : std::filesystem::path(file.string() + ".svg.tmp");
  {
    std::ofstream out(svg_file, std::ios::binary);
    out << svg;
    if (!out) throw_error(errc::io_error, "cannot write " + svg_file.string());
  }
  if (ext == ".svg") return;
  // rsvg-convert is librsvg's converter; the shell's 127 is "command not found".
  const std::string cmd = "command -v rsvg-convert >/dev/null 2>&1 || exit 127; exec rsvg-convert -f png -o '" +
                          file.string() + "' '" + svg_file.string() + "'";
  if (file.string().find('\'') != std::string::npos)
    throw_error(errc::invalid_argument, "--draw " + file.string() + ": a PNG path may not contain a quote");
  const int status = std::system(cmd.c_str());
  std::filesystem::remove(svg_file);
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (code == 127)
    throw_error(errc::unsupported, "--draw " + file.string() +
                                       ": PNG needs rsvg-convert (Debian: apt-get install librsvg2-bin); .svg needs nothing");
  if (code != 0) throw_error(errc::io_error, "rsvg-convert could not write " + file.string() + " (status " + std::to_string(code) + ")");
}

}  // namespace umem::umtopo
