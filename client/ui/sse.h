// Server-Sent Events framing (the text/event-stream format browsers read
// with EventSource): what the dashboard writes to push a sweep's progress.
// Thread-safety: free functions, no state.
#ifndef RANKSWEEP_CLIENT_UI_SSE_H_
#define RANKSWEEP_CLIENT_UI_SSE_H_

#include <string>
#include <string_view>

namespace ranksweep::client::ui {

// One event: "event: NAME\n", one "data: LINE\n" per line of `data` (a
// "\r\n", "\r" or "\n" ends a line, as the format defines), then a blank
// line. An empty `event` leaves the event line out (the browser calls it
// "message"); a name with a line break in it is cut at the break, since it
// would end the field.
std::string SseEvent(std::string_view event, std::string_view data);

// A comment line, which the browser ignores: sent while nothing happens so
// that a closed page is noticed (the write fails) and proxies keep the
// connection open.
std::string SseComment(std::string_view text);

}  // namespace ranksweep::client::ui

#endif  // RANKSWEEP_CLIENT_UI_SSE_H_
