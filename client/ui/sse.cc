#include "client/ui/sse.h"

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
  if (!event.empty()) out.append("event: ").append(event).append("\n");
  size_t start = 0;
  while (true) {
    const size_t end = data.find_first_of("\r\n", start);
    out.append("data: ").append(data.substr(start, end - start)).append("\n");
    if (end == std::string_view::npos) break;
    start = end + 1;
    if (data[end] == '\r' && start < data.size() && data[start] == '\n') ++start;
  }
  out += "\n";
  return out;
}

std::string SseComment(std::string_view text) {
  return std::string(": ").append(FirstLine(text)).append("\n\n");
}

}  // namespace ranksweep::client::ui
