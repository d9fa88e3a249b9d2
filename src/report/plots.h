// Figures drawn by gnuplot (a subprocess; Debian's gnuplot-nox has the pngcairo and svg
// terminals): each figure becomes DIR/NAME.png, DIR/NAME.svg and, to re-draw or restyle it,
// the data DIR/NAME.dat and the script DIR/NAME.gp.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace normlab::report {

struct Series {
  std::string title;
  std::vector<std::pair<double, double>> points;  // (x, y), drawn in this order
  bool dashed = false;                            // bounds and references
};

struct LineFigure {
  std::string name, title, xlabel, ylabel;
  bool logx = false, logy = false;
  double ymin = 0.0;  // > 0: the y axis starts there (lines below it are clipped); 0: autoscaled
  std::vector<Series> series;
  std::vector<std::pair<double, std::string>> marks;  // vertical lines at x, labelled
};

// Counts over a regular (x, y) grid, e.g. histogram bins over steps.
struct HeatMap {
  std::string name, title, xlabel, ylabel, cblabel;
  std::vector<double> xs, ys;              // grid coordinates (cell centres), ascending
  std::vector<std::vector<double>> value;  // value[i][j] at (xs[i], ys[j]); <= 0 left blank
};

// Draws into `dir` (PNG and SVG); false (nothing written) when there is no finite point.
// Non-finite points are left out, and on a log axis values below 1e-300 (zeros, underflow).
// Throws std::runtime_error with gnuplot's message when it fails or is missing.
bool draw(const LineFigure& figure, const std::string& dir);
bool draw(const HeatMap& map, const std::string& dir);

}  // namespace normlab::report
