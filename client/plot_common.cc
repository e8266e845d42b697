// What every figure (plot.h, law_plot.h, curves.h) shares: SVG text and
// coordinates, the palette's line styles and markers, text boxes and their
// estimated widths, and the ranges of the presentation flags.
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/plot.h"

namespace ranksweep::client {

std::string SvgEscape(const std::string& s) {
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

std::string SvgNum(double v) { return absl::StrFormat("%.1f", v); }

PlotStyle PlotStyleOf(size_t line) {
  // Okabe-Ito, without its yellow.
  static constexpr const char* kColors[kPlotColors] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                                       "#56B4E9", "#E69F00", "#000000"};
  // Solid, dash-dot, short dashes, dash-dot-dot: none is the rank-less
  // reference line's 10,5 or a gap's 1,4.
  static constexpr const char* kDashes[4] = {"", "7,2,1.5,2", "3,2", "7,2,1.5,2,1.5,2"};
  // Past the palette, dash and marker change together for the second to
  // fourth round (a = 0) and then shift against each other, so each of
  // the 16 (dash, marker) pairs comes once per colour.
  const size_t round = (line / kPlotColors) % 16;
  const size_t a = round / 4, b = round % 4;
  return {kColors[line % kPlotColors], kDashes[b], static_cast<int>((a + b) % 4)};
}

std::string PlotMarkerSvg(int shape, const char* cls, double x, double y, double r,
                          const std::string& attributes) {
  switch (shape) {
    case 1: {  // a square of the circle's area
      const double h = r * 0.886;
      return absl::StrCat("<rect class=\"", cls, "\" x=\"", SvgNum(x - h), "\" y=\"",
                          SvgNum(y - h), "\" width=\"", SvgNum(2 * h), "\" height=\"",
                          SvgNum(2 * h), "\" ", attributes, "/>\n");
    }
    case 2: {  // a triangle, point up
      const double h = r * 1.2;
      return absl::StrCat("<path class=\"", cls, "\" d=\"M", SvgNum(x), ",", SvgNum(y - h), " L",
                          SvgNum(x + h * 0.866), ",", SvgNum(y + h * 0.5), " L",
                          SvgNum(x - h * 0.866), ",", SvgNum(y + h * 0.5), " Z\" ", attributes,
                          "/>\n");
    }
    case 3: {  // a diamond
      const double h = r * 1.15;
      return absl::StrCat("<path class=\"", cls, "\" d=\"M", SvgNum(x), ",", SvgNum(y - h), " L",
                          SvgNum(x + h), ",", SvgNum(y), " L", SvgNum(x), ",", SvgNum(y + h),
                          " L", SvgNum(x - h), ",", SvgNum(y), " Z\" ", attributes, "/>\n");
    }
    default:
      return absl::StrCat("<circle class=\"", cls, "\" cx=\"", SvgNum(x), "\" cy=\"", SvgNum(y),
                          "\" r=\"", absl::StrCat(r), "\" ", attributes, "/>\n");
  }
}

bool PlotBox::Overlaps(const PlotBox& o) const {
  return x0 < o.x1 && o.x0 < x1 && y0 < o.y1 && o.y0 < y1;
}

bool PlotBox::Inside(const PlotBox& o) const {
  return x0 >= o.x0 && x1 <= o.x1 && y0 >= o.y0 && y1 <= o.y1;
}

double EstimateTextWidth(const std::string& text, double font_size) {
  // 0.62 em per character is above the average advance of common sans-serif
  // faces (0.5-0.56 em), so a box estimated here contains the drawn text.
  double chars = 0;
  for (unsigned char c : text) chars += (c & 0xC0) == 0x80 ? 0 : 1;  // UTF-8 lead bytes
  return chars * 0.62 * font_size;
}

absl::Status CheckPlotRanges(const PlotInput& input) {
  if (!(input.font_size >= kMinPlotFontSize && input.font_size <= kMaxPlotFontSize)) {
    return absl::InvalidArgumentError(absl::StrCat("--font-size: ", input.font_size,
                                                   " is out of range; use ", kMinPlotFontSize,
                                                   " to ", kMaxPlotFontSize, " (px)"));
  }
  for (const auto& [name, v] : {std::pair<const char*, int>{"width", input.width},
                                {"height", input.height}}) {
    if (v != 0 && (v < kMinPlotSize || v > kMaxPlotSize)) {
      return absl::InvalidArgumentError(absl::StrCat("--size: the ", name, " ", v,
                                                     " is out of range; use ", kMinPlotSize,
                                                     " to ", kMaxPlotSize, " (px)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace ranksweep::client
