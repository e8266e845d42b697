// Puts a Dashboard on a socket with cpp-httplib, and streams a sweep's
// events to the browser as Server-Sent Events. Knows HTTP, not gRPC: the
// data comes from the Backend it is given.
//
// Thread-safety: Bind, then Serve on one thread; Stop from any other thread
// (not from a signal handler). httplib serves requests on a pool of
// threads, so the Backend must be thread-safe.
#ifndef RANKSWEEP_CLIENT_UI_HTTP_SERVER_H_
#define RANKSWEEP_CLIENT_UI_HTTP_SERVER_H_

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "client/ui/dashboard.h"
#include "client/ui/listen.h"

namespace httplib {
class Server;
}

namespace ranksweep::client::ui {

class DashboardServer {
 public:
  // `backend` is not owned and outlives the server. `action_key` is the
  // secret an action must carry (Dashboard); empty = read-only. An idle
  // event stream gets a comment every `keep_alive`, which is how a closed
  // page is noticed.
  DashboardServer(Backend* backend, ListenAddress address, bool allow_remote,
                  std::string action_key,
                  std::chrono::milliseconds keep_alive = std::chrono::seconds(15));
  ~DashboardServer();

  // Binds the listening socket; returns the port (the one chosen when the
  // address's port is 0). Unavailable when the address cannot be bound.
  absl::StatusOr<int> Bind();
  // Serves until Stop(). Returns false when serving failed.
  bool Serve();
  // Stops serving: open event streams end within about a second.
  void Stop();

 private:
  // Writes the events of one sweep to `sink` until the sweep ends, the page
  // goes away or Stop(); httplib's content provider.
  bool StreamEvents(const std::string& sweep_id, void* sink);

  Backend* backend_;
  ListenAddress address_;
  bool allow_remote_;
  std::string action_key_;
  std::chrono::milliseconds keep_alive_;
  int port_ = 0;
  std::unique_ptr<httplib::Server> server_;
  std::unique_ptr<Dashboard> dashboard_;
  std::atomic<bool> stopping_{false};
};

}  // namespace ranksweep::client::ui

#endif  // RANKSWEEP_CLIENT_UI_HTTP_SERVER_H_
