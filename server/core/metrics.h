// The operator's metrics of ranksweepd, kept in memory and rendered in the
// Prometheus text exposition format (version 0.0.4) for `ranksweepd
// --metrics-listen`. No gRPC and no HTTP here: the adapters count into a
// MetricsRegistry, the HTTP endpoint (server/metrics_http.h) serves
// Render(), so the format is unit-tested byte for byte.
//
// Three kinds, as Prometheus has them: counters (only go up; e.g.
// ranksweep_results_accepted_total), gauges (set to a value, e.g. cells by
// state, refreshed by collectors just before each render) and histograms
// (cumulative buckets plus _sum and _count). Each family has a name, a help
// line and any number of series told apart by their labels.
//
// Bounded memory: a family holds at most kMaxSeriesPerFamily series. The
// label values callers pass come from fixed sets (metrics_interceptor.h
// names every method it does not serve "unknown"), so the bound is a guard,
// not a limit that normal use meets: a value past it is dropped (nothing
// recorded) and counted in dropped_series().
//
// Errors: using a name that was not defined, or a name as the wrong kind,
// is a programming error and is ignored (nothing recorded) rather than
// crashing a coordinator. Thread-safety: every method may be called from any
// thread; collectors run under no lock of the registry's and must not call
// Render().
#ifndef RANKSWEEP_SERVER_CORE_METRICS_H_
#define RANKSWEEP_SERVER_CORE_METRICS_H_

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace ranksweep::server {

// Label name -> value, e.g. {{"state", "done"}}. Order does not matter: a
// series is identified by its sorted labels.
using MetricLabels = std::vector<std::pair<std::string, std::string>>;

class MetricsRegistry {
 public:
  static constexpr size_t kMaxSeriesPerFamily = 1000;

  // Families are rendered in the order they are defined. Names follow
  // Prometheus rules ([a-zA-Z_:][a-zA-Z0-9_:]*); counters end in "_total".
  void DefineCounter(const std::string& name, const std::string& help);
  void DefineGauge(const std::string& name, const std::string& help);
  // `bounds`: the buckets' upper bounds, ascending; +Inf is added.
  void DefineHistogram(const std::string& name, const std::string& help,
                       std::vector<double> bounds);

  // Counter += delta (delta >= 0; a negative one is ignored).
  void Add(const std::string& name, const MetricLabels& labels, double delta = 1);
  // Gauge = value.
  void Set(const std::string& name, const MetricLabels& labels, double value);
  // Drops every series of a gauge (before a collector sets the current ones,
  // so a state or device that went away disappears).
  void ClearGauge(const std::string& name);
  // Histogram: counts `value` in every bucket whose bound is >= value.
  void Observe(const std::string& name, const MetricLabels& labels, double value);

  // A counter's or a histogram's series, named once and found on its first
  // use, then counted into without looking its family and labels up again:
  // for the callers on every RPC (server/service/metrics_interceptor.h).
  // Add and Observe with a Series do what they do with its name and labels:
  // the series is made on first use, and nothing is recorded for an
  // undefined name, a name of another kind or a full family. Counters' and
  // histograms' series are never removed, so what a Series found stays
  // valid. A Series belongs to one registry; the registry's lock guards it.
  class Series {
   public:
    Series(std::string name, MetricLabels labels);

   private:
    friend class MetricsRegistry;
    const std::string name_;
    const MetricLabels labels_;                 // sorted
    void* found_ = nullptr;                     // a counter's double, or a Histogram
    bool histogram_ = false;                    // which of the two found_ is
    const std::vector<double>* bounds_ = nullptr;  // a histogram's buckets
  };
  void Add(Series& series, double delta = 1);
  void Observe(Series& series, double value);

  // Runs before every Render(), in the order added: sets gauges from the
  // current state (cells by state, workers alive).
  void AddCollector(std::function<void(MetricsRegistry*)> collector);

  // The current value of a counter or gauge series; 0 when it does not exist.
  // For tests and logs.
  double Value(const std::string& name, const MetricLabels& labels) const;

  // Runs the collectors, then renders every family: "# HELP", "# TYPE", then
  // its series sorted by labels, e.g. `ranksweep_cells{state="done"} 12`.
  // Label values escape \, " and newline; numbers are integers when
  // integral, else the shortest text that reads back the same; +Inf, -Inf,
  // NaN as Prometheus spells them. A family without series prints only its
  // HELP and TYPE lines.
  std::string Render();

  // Series refused because their family was full (kMaxSeriesPerFamily).
  int64_t dropped_series() const;
  // Every series of every family, for tests of the bound.
  size_t series() const;

 private:
  enum class Kind { kCounter, kGauge, kHistogram };
  struct Histogram {
    std::vector<double> counts;  // per bucket, not cumulative; last = +Inf
    double sum = 0;
    double count = 0;
  };
  struct Family {
    Kind kind;
    std::string help;
    std::vector<double> bounds;                     // histograms
    std::map<MetricLabels, double> values;          // counters, gauges
    std::map<MetricLabels, Histogram> histograms;  // histograms
  };
  static MetricLabels Sorted(MetricLabels labels);
  static void Count(Histogram& h, const std::vector<double>& bounds, double value);
  // What `series` names, found on its first use: a counter's value or a
  // Histogram. Null while its family is undefined, of another kind or full,
  // and for a series found as the other kind.
  void* Resolve(Series& series, Kind kind) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Family* Find(const std::string& name, Kind kind) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Define(const std::string& name, Kind kind, const std::string& help,
              std::vector<double> bounds);

  // The series of `f` for `labels` (sorted), created when the family has
  // room; null (and counted as dropped) when it has none.
  template <typename Map>
  typename Map::mapped_type* SeriesOf(Map& map, const MetricLabels& labels)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  int64_t dropped_series_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> order_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Family> families_ ABSL_GUARDED_BY(mu_);
  absl::Mutex collectors_mu_;
  std::vector<std::function<void(MetricsRegistry*)>> collectors_
      ABSL_GUARDED_BY(collectors_mu_);
};

// The families ranksweepd exports, defined on `registry` (docs/DEPLOY.md,
// "Metrics"): ranksweep_build_info{build_id,version} (1),
// ranksweep_sweeps{state}, ranksweep_cells{state},
// ranksweep_leases_granted_total, ranksweep_leases_expired_total,
// ranksweep_leases_lost_total, ranksweep_results_accepted_total,
// ranksweep_results_rejected_total{reason}, ranksweep_workers_alive{device},
// ranksweep_store_commit_seconds (histogram), ranksweep_rpcs_total{method,code},
// ranksweep_rpc_duration_seconds{method} (histogram). Every counter has a
// sample from the start: those without labels at 0, rejected_total at 0 for
// each refusal code (RejectionReasons); rpcs_total gets its zero samples
// from the interceptor, which knows the methods
// (server/service/metrics_interceptor.h). `build_id` is the binary's
// RANKSWEEP_BUILD_ID ("0.9.0+1a2b3c4d5e6f.0123456789ab"); its part before
// '+' is the version label.
void DefineCoordinatorMetrics(MetricsRegistry* registry,
                              const std::string& build_id = "unknown");

// The status codes a refused CompleteTasks is counted under (every code
// but OK), as gRPC names them: "CANCELLED", ..., "UNAUTHENTICATED".
const std::vector<std::string>& RejectionReasons();

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_CORE_METRICS_H_
