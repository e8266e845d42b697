#include "client/ui/sse.h"

#include "absl/strings/str_cat.h"

namespace ranksweep::client::ui {
namespace {

// `text` up to its first line break.
std::string_view FirstLine(std::string_view text) {
  return text.substr(0, text.find_first_of("\r\n"));
}

}  // namespace

std::string SseEvent(std::string_view event, std::string_view data) {
  std::string out;
  event = FirstLine(event);
  if (!event.empty()) absl::StrAppend(&out, "event: ", event, "\n");
  size_t start = 0;
  while (true) {
    const size_t end = data.find_first_of("\r\n", start);
    absl::StrAppend(&out, "data: ", data.substr(start, end - start), "\n");
    if (end == std::string_view::npos) break;
    start = end + 1;
    if (data[end] == '\r' && start < data.size() && data[start] == '\n') ++start;
  }
  out += "\n";
  return out;
}

std::string SseComment(std::string_view text) { return absl::StrCat(": ", FirstLine(text), "\n\n"); }

}  // namespace ranksweep::client::ui
