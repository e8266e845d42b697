// RenderSvgToPng (plot.h): librsvg renders the SVG onto a cairo image
// surface, cairo encodes it as PNG. Kept apart from plot.cc so the drawing
// itself has no dependency but the SVG text.
#include <cairo.h>
#include <librsvg/rsvg.h>

#include <cmath>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/plot.h"

namespace ranksweep::client {
namespace {

cairo_status_t AppendToString(void* closure, const unsigned char* data, unsigned int length) {
  static_cast<std::string*>(closure)->append(reinterpret_cast<const char*>(data), length);
  return CAIRO_STATUS_SUCCESS;
}

}  // namespace

absl::StatusOr<std::string> RenderSvgToPng(const std::string& svg, double scale) {
  if (!(scale > 0 && scale <= 8)) {
    return absl::InvalidArgumentError(absl::StrCat("PNG scale must be in (0, 8], got ", scale));
  }
  GError* error = nullptr;
  std::unique_ptr<RsvgHandle, decltype(&g_object_unref)> handle(
      rsvg_handle_new_from_data(reinterpret_cast<const guint8*>(svg.data()), svg.size(), &error),
      &g_object_unref);
  if (handle == nullptr) {
    const std::string why = error != nullptr ? error->message : "unknown error";
    if (error != nullptr) g_error_free(error);
    return absl::InvalidArgumentError(absl::StrCat("cannot read the SVG: ", why));
  }
  gdouble width = 0, height = 0;
  if (!rsvg_handle_get_intrinsic_size_in_pixels(handle.get(), &width, &height) || width <= 0 ||
      height <= 0) {
    return absl::InvalidArgumentError("the SVG has no width and height in pixels");
  }
  const int w = static_cast<int>(std::ceil(width * scale));
  const int h = static_cast<int>(std::ceil(height * scale));
  std::unique_ptr<cairo_surface_t, decltype(&cairo_surface_destroy)> surface(
      cairo_image_surface_create(CAIRO_FORMAT_ARGB32, w, h), &cairo_surface_destroy);
  std::unique_ptr<cairo_t, decltype(&cairo_destroy)> cr(cairo_create(surface.get()),
                                                        &cairo_destroy);
  cairo_scale(cr.get(), scale, scale);
  const RsvgRectangle viewport = {0, 0, width, height};
  if (!rsvg_handle_render_document(handle.get(), cr.get(), &viewport, &error)) {
    const std::string why = error != nullptr ? error->message : "unknown error";
    if (error != nullptr) g_error_free(error);
    return absl::InternalError(absl::StrCat("cannot render the SVG: ", why));
  }
  std::string png;
  if (cairo_surface_write_to_png_stream(surface.get(), &AppendToString, &png) !=
      CAIRO_STATUS_SUCCESS) {
    return absl::InternalError("cannot encode the PNG");
  }
  return png;
}

}  // namespace ranksweep::client
