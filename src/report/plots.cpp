#include "report/plots.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>

#include "core/file_io.h"

namespace normlab::report {
namespace {

// A gnuplot string literal (no enhanced-text markup: the terminals are set noenhanced).
std::string quote(const std::string& s) {
  std::string q = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') q += '\\';
    q += c;
  }
  return q + "\"";
}

// The smallest value drawn on a log axis. Below it lie zeros and underflow, e.g. the 4.9e-324 a
// spectral density's Gaussian broadening leaves far from every node: gnuplot's autoscaled log
// range then reaches 0 and it refuses to plot ("y range must be greater than 0").
constexpr double kLogFloor = 1e-300;

std::string num(double x) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.10g", x);
  return buf;
}

// The same plot commands once for PNG and once for SVG, then gnuplot on the script.
void render(const std::string& dir, const std::string& name, const std::string& setup, const std::string& plot,
            const std::string& data) {
  std::filesystem::create_directories(dir);
  const std::string absolute = std::filesystem::absolute(dir).string();
  const std::string base = absolute + "/" + name;
  core::write_file_atomic(base + ".dat", data);
  // The script reads its data relative to its own folder.
  std::string script = "# drawn by normlab report; data in " + name + ".dat\ncd " + quote(absolute) + "\n" + setup;
  script += "set terminal pngcairo size 960,600 noenhanced font \",11\"\nset output " + quote(base + ".png") + "\n" +
            plot + "\nset terminal svg size 960,600 noenhanced font \"sans,12\"\nset output " +
            quote(base + ".svg") + "\nreplot\nset output\n";
  core::write_file_atomic(base + ".gp", script);
  const std::string log = base + ".gnuplot.log";
  const std::string command = "gnuplot " + quote(base + ".gp") + " > " + quote(log) + " 2>&1";
  const int rc = std::system(command.c_str());
  std::string message;
  if (std::filesystem::exists(log)) {
    const auto bytes = core::read_file(log);
    message.assign(bytes.begin(), bytes.end());
    std::filesystem::remove(log);
  }
  if (rc != 0) throw std::runtime_error("gnuplot failed on " + base + ".gp (is gnuplot installed?): " + message);
}

}  // namespace

bool draw(const LineFigure& f, const std::string& dir) {
  std::string data, plot;
  int index = 0;
  for (const auto& s : f.series) {
    std::string block;
    for (const auto& [x, y] : s.points)
      if (std::isfinite(x) && std::isfinite(y) && (!f.logx || x >= kLogFloor) && (!f.logy || y >= kLogFloor))
        block += num(x) + " " + num(y) + "\n";
    if (block.empty()) continue;
    data += "# " + s.title + "\n" + block + "\n\n";
    // gnuplot's own line types repeat their colours after 8 series; 16 explicit colours (and
    // point types) keep up to 16 series apart, e.g. 5 schemes x 2 deltas in the perturb figure.
    static const char* const kColours[] = {"#9400d3", "#009e73", "#56b4e9", "#e69f00", "#f0e442", "#0072b2",
                                           "#e51e10", "#000000", "#a0522d", "#ff69b4", "#808000", "#00ced1",
                                           "#4b0082", "#7f7f7f", "#32cd32", "#dc143c"};
    const int n = static_cast<int>(sizeof kColours / sizeof kColours[0]);
    plot += std::string(plot.empty() ? "plot " : ", ") + quote(f.name + ".dat") + " index " + std::to_string(index) +
            " using 1:2 with linespoints pointsize 0.6 lc rgb \"" + kColours[index % n] + "\" pt " +
            std::to_string(index % 13 + 1) + (s.dashed ? " dashtype 2" : "") + " title " + quote(s.title);
    ++index;
  }
  if (plot.empty()) return false;
  std::string setup = "set datafile separator whitespace\nset title " + quote(f.title) + "\nset xlabel " +
                      quote(f.xlabel) + "\nset ylabel " + quote(f.ylabel) + "\nset key outside right top\nset grid\n";
  if (f.logx) setup += "set logscale x\n";
  if (f.logy) setup += "set logscale y\nset format y \"%g\"\n";
  if (f.ymin > 0) setup += "set yrange [" + num(f.ymin) + ":*]\n";
  for (const auto& [x, label] : f.marks)
    if (std::isfinite(x))
      setup += "set arrow from " + num(x) + ", graph 0 to " + num(x) + ", graph 1 nohead dashtype 3 lc rgb \"red\"\n" +
               "set label " + quote(label) + " at " + num(x) + ", graph 0.95 right offset -0.5,0 tc rgb \"red\"\n";
  render(dir, f.name, setup, plot, data);
  return true;
}

bool draw(const HeatMap& m, const std::string& dir) {
  std::string data;
  bool any = false;
  for (size_t i = 0; i < m.xs.size(); ++i) {
    for (size_t j = 0; j < m.ys.size(); ++j) {
      const double v = m.value[i][j];
      any = any || v > 0;
      data += num(m.xs[i]) + " " + num(m.ys[j]) + " " + (v > 0 ? num(std::log10(v)) : "NaN") + "\n";
    }
    data += "\n";
  }
  if (!any) return false;
  const std::string setup = "set title " + quote(m.title) + "\nset xlabel " + quote(m.xlabel) +
                            "\nset ylabel " + quote(m.ylabel) + "\nset cblabel " + quote("log10 " + m.cblabel) +
                            "\nset autoscale fix\nset palette rgbformulae 33,13,10\nunset key\n";
  // One pixel per (x, y) centred on it; NaN (no count) is left blank.
  const std::string plot = "plot " + quote(m.name + ".dat") + " using 1:2:3 with image";
  render(dir, m.name, setup, plot, data);
  return true;
}

}  // namespace normlab::report
