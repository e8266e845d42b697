#include "server/core/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace ranksweep::server {
namespace {

std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    return absl::StrCat(static_cast<int64_t>(v));
  }
  char buffer[32];
  // Shortest round trip, in %g style (0.0005, not 5e-04).
  const auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, v,
                                       std::chars_format::general);
  (void)ec;  // 32 bytes hold any double
  return std::string(buffer, end);
}

// Backslash and newline escaped, as the format wants in help text; label
// values escape the double quote as well.
std::string Escape(const std::string& s, bool quote) {
  std::string out;
  for (char c : s) {
    if (c == '\\' || (quote && c == '"')) {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

// {a="1",b="2"}, or "" without labels; `extra` (le="0.1") goes last.
std::string LabelText(const MetricLabels& labels, const std::string& extra = "") {
  if (labels.empty() && extra.empty()) return "";
  std::string out = "{";
  for (size_t i = 0; i < labels.size(); ++i) {
    absl::StrAppend(&out, i == 0 ? "" : ",", labels[i].first, "=\"",
                    Escape(labels[i].second, /*quote=*/true), "\"");
  }
  if (!extra.empty()) absl::StrAppend(&out, labels.empty() ? "" : ",", extra);
  return out + "}";
}

}  // namespace

MetricLabels MetricsRegistry::Sorted(MetricLabels labels) {
  std::sort(labels.begin(), labels.end());
  return labels;
}

void MetricsRegistry::Define(const std::string& name, Kind kind, const std::string& help,
                             std::vector<double> bounds) {
  absl::MutexLock lock(&mu_);
  if (families_.count(name) > 0) return;
  order_.push_back(name);
  Family& f = families_[name];
  f.kind = kind;
  f.help = help;
  std::sort(bounds.begin(), bounds.end());
  f.bounds = std::move(bounds);
}

void MetricsRegistry::DefineCounter(const std::string& name, const std::string& help) {
  Define(name, Kind::kCounter, help, {});
}

void MetricsRegistry::DefineGauge(const std::string& name, const std::string& help) {
  Define(name, Kind::kGauge, help, {});
}

void MetricsRegistry::DefineHistogram(const std::string& name, const std::string& help,
                                      std::vector<double> bounds) {
  Define(name, Kind::kHistogram, help, std::move(bounds));
}

MetricsRegistry::Family* MetricsRegistry::Find(const std::string& name, Kind kind) {
  auto it = families_.find(name);
  return it != families_.end() && it->second.kind == kind ? &it->second : nullptr;
}

template <typename Map>
typename Map::mapped_type* MetricsRegistry::SeriesOf(Map& map, const MetricLabels& labels) {
  MetricLabels key = Sorted(labels);
  auto it = map.find(key);
  if (it != map.end()) return &it->second;
  if (map.size() >= kMaxSeriesPerFamily) {
    ++dropped_series_;
    return nullptr;
  }
  return &map[std::move(key)];
}

void MetricsRegistry::Add(const std::string& name, const MetricLabels& labels, double delta) {
  if (!(delta >= 0)) return;
  absl::MutexLock lock(&mu_);
  if (Family* f = Find(name, Kind::kCounter)) {
    if (double* v = SeriesOf(f->values, labels)) *v += delta;
  }
}

void MetricsRegistry::Set(const std::string& name, const MetricLabels& labels, double value) {
  absl::MutexLock lock(&mu_);
  if (Family* f = Find(name, Kind::kGauge)) {
    if (double* v = SeriesOf(f->values, labels)) *v = value;
  }
}

int64_t MetricsRegistry::dropped_series() const {
  absl::MutexLock lock(&mu_);
  return dropped_series_;
}

size_t MetricsRegistry::series() const {
  absl::MutexLock lock(&mu_);
  size_t n = 0;
  for (const auto& [name, f] : families_) n += f.values.size() + f.histograms.size();
  return n;
}

void MetricsRegistry::ClearGauge(const std::string& name) {
  absl::MutexLock lock(&mu_);
  if (Family* f = Find(name, Kind::kGauge)) f->values.clear();
}

void MetricsRegistry::Count(Histogram& h, const std::vector<double>& bounds, double value) {
  if (h.counts.empty()) h.counts.assign(bounds.size() + 1, 0);
  const size_t bucket = static_cast<size_t>(
      std::lower_bound(bounds.begin(), bounds.end(), value) - bounds.begin());
  h.counts[bucket] += 1;
  h.sum += value;
  h.count += 1;
}

void MetricsRegistry::Observe(const std::string& name, const MetricLabels& labels,
                              double value) {
  absl::MutexLock lock(&mu_);
  Family* f = Find(name, Kind::kHistogram);
  if (f == nullptr) return;
  Histogram* series = SeriesOf(f->histograms, labels);
  if (series == nullptr) return;
  Count(*series, f->bounds, value);
}

MetricsRegistry::Series::Series(std::string name, MetricLabels labels)
    : name_(std::move(name)), labels_(Sorted(std::move(labels))) {}

void* MetricsRegistry::Resolve(Series& series, Kind kind) {
  const bool histogram = kind == Kind::kHistogram;
  if (series.found_ != nullptr) return series.histogram_ == histogram ? series.found_ : nullptr;
  Family* f = Find(series.name_, kind);
  if (f == nullptr) return nullptr;
  series.found_ = histogram ? static_cast<void*>(SeriesOf(f->histograms, series.labels_))
                            : static_cast<void*>(SeriesOf(f->values, series.labels_));
  series.histogram_ = histogram;
  series.bounds_ = &f->bounds;
  return series.found_;
}

void MetricsRegistry::Add(Series& series, double delta) {
  if (!(delta >= 0)) return;
  absl::MutexLock lock(&mu_);
  if (void* value = Resolve(series, Kind::kCounter)) *static_cast<double*>(value) += delta;
}

void MetricsRegistry::Observe(Series& series, double value) {
  absl::MutexLock lock(&mu_);
  if (void* h = Resolve(series, Kind::kHistogram)) {
    Count(*static_cast<Histogram*>(h), *series.bounds_, value);
  }
}

void MetricsRegistry::AddCollector(std::function<void(MetricsRegistry*)> collector) {
  absl::MutexLock lock(&collectors_mu_);
  collectors_.push_back(std::move(collector));
}

double MetricsRegistry::Value(const std::string& name, const MetricLabels& labels) const {
  absl::MutexLock lock(&mu_);
  auto it = families_.find(name);
  if (it == families_.end()) return 0;
  auto v = it->second.values.find(Sorted(labels));
  return v == it->second.values.end() ? 0 : v->second;
}

std::string MetricsRegistry::Render() {
  {
    absl::MutexLock lock(&collectors_mu_);
    for (const auto& collect : collectors_) collect(this);
  }
  absl::MutexLock lock(&mu_);
  std::string out;
  for (const std::string& name : order_) {
    const Family& f = families_.at(name);
    const char* type = f.kind == Kind::kCounter ? "counter"
                       : f.kind == Kind::kGauge ? "gauge"
                                                : "histogram";
    absl::StrAppend(&out, "# HELP ", name, " ", Escape(f.help, /*quote=*/false), "\n# TYPE ", name, " ",
                    type, "\n");
    for (const auto& [labels, value] : f.values) {
      absl::StrAppend(&out, name, LabelText(labels), " ", FormatValue(value), "\n");
    }
    for (const auto& [labels, h] : f.histograms) {
      double cumulative = 0;
      for (size_t i = 0; i < h.counts.size(); ++i) {
        cumulative += h.counts[i];
        const std::string le =
            i < f.bounds.size() ? FormatValue(f.bounds[i]) : std::string("+Inf");
        absl::StrAppend(&out, name, "_bucket", LabelText(labels, absl::StrCat("le=\"", le, "\"")),
                        " ", FormatValue(cumulative), "\n");
      }
      absl::StrAppend(&out, name, "_sum", LabelText(labels), " ", FormatValue(h.sum), "\n");
      absl::StrAppend(&out, name, "_count", LabelText(labels), " ", FormatValue(h.count), "\n");
    }
  }
  return out;
}

const std::vector<std::string>& RejectionReasons() {
  static const std::vector<std::string>* reasons = new std::vector<std::string>{
      "CANCELLED",          "UNKNOWN",           "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
      "NOT_FOUND",          "ALREADY_EXISTS",    "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
      "FAILED_PRECONDITION", "ABORTED",          "OUT_OF_RANGE",     "UNIMPLEMENTED",
      "INTERNAL",           "UNAVAILABLE",       "DATA_LOSS",        "UNAUTHENTICATED"};
  return *reasons;
}

void DefineCoordinatorMetrics(MetricsRegistry* r, const std::string& build_id) {
  r->DefineGauge("ranksweep_build_info",
                 "Always 1; the labels say which build of ranksweepd is running.");
  r->Set("ranksweep_build_info",
         {{"build_id", build_id}, {"version", build_id.substr(0, build_id.find('+'))}}, 1);
  r->DefineGauge("ranksweep_sweeps", "Sweeps in the store, by state.");
  r->DefineGauge("ranksweep_cells", "Cells of every sweep in the store, by state.");
  r->DefineCounter("ranksweep_leases_granted_total",
                   "Cells leased to workers (AcquireTasks, and CompleteTasks asking for more).");
  r->DefineCounter("ranksweep_leases_expired_total",
                   "Leases that ran past their deadline without a heartbeat and were reclaimed.");
  r->DefineCounter("ranksweep_leases_lost_total",
                   "Leases a worker heartbeated that had expired, been reassigned or never "
                   "existed.");
  r->DefineCounter("ranksweep_results_accepted_total",
                   "Per-seed results stored by CompleteTasks (duplicates of a stored result "
                   "included once).");
  r->DefineCounter("ranksweep_results_rejected_total",
                   "Per-seed results CompleteTasks refused, by the status code of the refusal.");
  r->DefineGauge("ranksweep_workers_alive",
                 "Workers seen within three lease periods, by device (cpu, cuda).");
  r->DefineHistogram("ranksweep_store_commit_seconds",
                     "Time of one SQLite COMMIT (with its sync) of the store's writer; one "
                     "commit may carry many calls' writes.",
                     {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5});
  r->DefineCounter("ranksweep_rpcs_total",
                   "gRPC calls finished, by full method name and status code; every method "
                   "the server does not serve is counted as \"unknown\".");
  r->DefineHistogram("ranksweep_rpc_duration_seconds",
                     "Time from a call's start to its status, by full method name (\"unknown\" "
                     "for every method the server does not serve); a stream's is its lifetime.",
                     {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
                      10, 30, 60, 300});
  r->DefineCounter("ranksweep_query_cache_hits_total",
                   "Row queries (QueryResults without group_by, state or curves) answered "
                   "with a kept reply, their sweep's results unchanged since.");
  r->DefineCounter("ranksweep_query_cache_misses_total",
                   "Row queries read afresh: no reply kept for them, or their sweep's results "
                   "changed since.");
  r->DefineGauge("ranksweep_query_cache_bytes",
                 "Bytes of replies kept for row queries (at most --query-cache-mb).");
  r->Set("ranksweep_query_cache_bytes", {}, 0);
  // Counters exist from the start, at 0, so that a rate() or increase()
  // over a fresh coordinator has a first sample.
  for (const char* name : {"ranksweep_leases_granted_total", "ranksweep_leases_expired_total",
                           "ranksweep_leases_lost_total", "ranksweep_results_accepted_total",
                           "ranksweep_query_cache_hits_total",
                           "ranksweep_query_cache_misses_total"}) {
    r->Add(name, {}, 0);
  }
  for (const std::string& reason : RejectionReasons()) {
    r->Add("ranksweep_results_rejected_total", {{"reason", reason}}, 0);
  }
}

}  // namespace ranksweep::server
