// RenderSvgToPng and RenderSvgToPdf (plot.h): librsvg renders the SVG onto
// a cairo surface, cairo encodes it as PNG or writes it as PDF. Kept apart
// from plot.cc so the drawing itself has no dependency but the SVG text.
#include <cairo-pdf.h>
#include <cairo.h>
#include <librsvg/rsvg.h>

#include <cmath>
#include <memory>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/plot.h"

namespace ranksweep::client {
namespace {

cairo_status_t AppendToString(void* closure, const unsigned char* data, unsigned int length) {
  static_cast<std::string*>(closure)->append(reinterpret_cast<const char*>(data), length);
  return CAIRO_STATUS_SUCCESS;
}

using Handle = std::unique_ptr<RsvgHandle, decltype(&g_object_unref)>;

// The document and its size in SVG pixels.
absl::StatusOr<Handle> ReadSvg(const std::string& svg, double* width, double* height) {
  GError* error = nullptr;
  Handle handle(
      rsvg_handle_new_from_data(reinterpret_cast<const guint8*>(svg.data()), svg.size(), &error),
      &g_object_unref);
  if (handle == nullptr) {
    const std::string why = error != nullptr ? error->message : "unknown error";
    if (error != nullptr) g_error_free(error);
    return absl::InvalidArgumentError(absl::StrCat("cannot read the SVG: ", why));
  }
  gdouble w = 0, h = 0;
  if (!rsvg_handle_get_intrinsic_size_in_pixels(handle.get(), &w, &h) || w <= 0 || h <= 0) {
    return absl::InvalidArgumentError("the SVG has no width and height in pixels");
  }
  *width = w;
  *height = h;
  return handle;
}

absl::Status Draw(RsvgHandle* handle, cairo_t* cr, double width, double height) {
  GError* error = nullptr;
  const RsvgRectangle viewport = {0, 0, width, height};
  if (!rsvg_handle_render_document(handle, cr, &viewport, &error)) {
    const std::string why = error != nullptr ? error->message : "unknown error";
    if (error != nullptr) g_error_free(error);
    return absl::InternalError(absl::StrCat("cannot render the SVG: ", why));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> RenderSvgToPng(const std::string& svg, double scale) {
  if (!(scale > 0 && scale <= 8)) {
    return absl::InvalidArgumentError(absl::StrCat("PNG scale must be in (0, 8], got ", scale));
  }
  double width = 0, height = 0;
  absl::StatusOr<Handle> handle = ReadSvg(svg, &width, &height);
  if (!handle.ok()) return handle.status();
  const int w = static_cast<int>(std::ceil(width * scale));
  const int h = static_cast<int>(std::ceil(height * scale));
  std::unique_ptr<cairo_surface_t, decltype(&cairo_surface_destroy)> surface(
      cairo_image_surface_create(CAIRO_FORMAT_ARGB32, w, h), &cairo_surface_destroy);
  std::unique_ptr<cairo_t, decltype(&cairo_destroy)> cr(cairo_create(surface.get()),
                                                        &cairo_destroy);
  cairo_scale(cr.get(), scale, scale);
  if (absl::Status s = Draw(handle->get(), cr.get(), width, height); !s.ok()) return s;
  std::string png;
  if (cairo_surface_write_to_png_stream(surface.get(), &AppendToString, &png) !=
      CAIRO_STATUS_SUCCESS) {
    return absl::InternalError("cannot encode the PNG");
  }
  return png;
}

absl::StatusOr<std::string> RenderSvgToPdf(const std::string& svg) {
  double width = 0, height = 0;
  absl::StatusOr<Handle> handle = ReadSvg(svg, &width, &height);
  if (!handle.ok()) return handle.status();
  // CSS pixels: 96 to the inch, 72 points to the inch.
  constexpr double kPointsPerPixel = 72.0 / 96.0;
  std::string pdf;
  {
    std::unique_ptr<cairo_surface_t, decltype(&cairo_surface_destroy)> surface(
        cairo_pdf_surface_create_for_stream(&AppendToString, &pdf, width * kPointsPerPixel,
                                            height * kPointsPerPixel),
        &cairo_surface_destroy);
    std::unique_ptr<cairo_t, decltype(&cairo_destroy)> cr(cairo_create(surface.get()),
                                                          &cairo_destroy);
    cairo_scale(cr.get(), kPointsPerPixel, kPointsPerPixel);
    if (absl::Status s = Draw(handle->get(), cr.get(), width, height); !s.ok()) return s;
    cr.reset();
    cairo_surface_finish(surface.get());
    if (cairo_surface_status(surface.get()) != CAIRO_STATUS_SUCCESS) {
      return absl::InternalError(absl::StrCat(
          "cannot write the PDF: ", cairo_status_to_string(cairo_surface_status(surface.get()))));
    }
  }
  return pdf;
}

absl::StatusOr<FigureFormat> ResolveFigureFormat(const std::string& path,
                                                 const std::string& format) {
  auto of_name = [](const std::string& name, FigureFormat* out) {
    if (name == "svg") *out = FigureFormat::kSvg;
    else if (name == "png") *out = FigureFormat::kPng;
    else if (name == "pdf") *out = FigureFormat::kPdf;
    else return false;
    return true;
  };
  FigureFormat by_name = FigureFormat::kSvg;
  const size_t dot = path.rfind('.');
  const bool named = dot != std::string::npos && path.find('/', dot) == std::string::npos &&
                     of_name(absl::AsciiStrToLower(path.substr(dot + 1)), &by_name);
  if (format.empty()) {
    if (!named) {
      return absl::InvalidArgumentError(absl::StrCat(
          "-o: \"", path, "\" must end in .svg, .png or .pdf, or give --format svg|png|pdf"));
    }
    return by_name;
  }
  FigureFormat given = FigureFormat::kSvg;
  if (!of_name(format, &given)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--format: \"", format, "\" is not one of svg, png, pdf"));
  }
  if (named && given != by_name) {
    return absl::InvalidArgumentError(absl::StrCat("--format ", format, ": -o \"", path,
                                                   "\" names another format; drop one or make "
                                                   "them agree"));
  }
  return given;
}

absl::StatusOr<std::string> EncodeFigure(const std::string& svg, FigureFormat format) {
  switch (format) {
    case FigureFormat::kPng: return RenderSvgToPng(svg);
    case FigureFormat::kPdf: return RenderSvgToPdf(svg);
    case FigureFormat::kSvg: break;
  }
  return svg;
}

}  // namespace ranksweep::client
