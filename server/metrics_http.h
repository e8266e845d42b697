// The HTTP endpoint of `ranksweepd --metrics-listen=HOST:PORT`: GET /metrics
// answers MetricsRegistry::Render() as Prometheus text (version 0.0.4);
// every other path is 404. No authentication: the numbers name no sweep
// and no user, but bind it to an address only the scraper reaches
// (docs/DEPLOY.md, "Metrics").
//
// Thread-safety: Start and Stop from one thread; requests are served on the
// endpoint's own threads. The registry must outlive the endpoint.
#ifndef RANKSWEEP_SERVER_METRICS_HTTP_H_
#define RANKSWEEP_SERVER_METRICS_HTTP_H_

#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "server/core/metrics.h"

namespace httplib {
class Server;
}

namespace ranksweep::server {

class MetricsHttpServer {
 public:
  // Binds HOST:PORT (port 0 picks a free one) and starts serving.
  // InvalidArgument naming --metrics-listen for an address without a port;
  // Unavailable when it cannot bind.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(const std::string& address,
                                                                  MetricsRegistry* metrics);
  ~MetricsHttpServer();  // Stop()s

  // HOST:PORT actually bound.
  const std::string& address() const { return address_; }
  void Stop();

 private:
  MetricsHttpServer() = default;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::string address_;
};

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_METRICS_HTTP_H_
