#include "server/core/results/result_checks.h"

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/spec/curve.h"
#include "common/spec/dataset_kinds.h"
#include "common/spec/result_metrics.h"
#include "common/status_macros.h"

namespace ranksweep::server {
namespace {

absl::Status Refuse(const std::string& field, const std::string& want, int64_t got) {
  return absl::InvalidArgumentError(absl::StrCat("result.", field, " must be ", want, ", got ", got));
}

}  // namespace

absl::Status CheckResultAgainstTask(const SeedResult& r, const TaskSpec& task) {
  const DatasetSpec& d = task.dataset;
  const DatasetFacts& f = r.facts;

  // A step metric (the first exact evaluation) happened during the run.
  for (const ResultMetric& m : ResultMetrics()) {
    const std::optional<double> v = GetMetric(m, r);
    if (m.range == MetricRange::kStep && v.has_value() && *v > r.steps) {
      return Refuse(m.name, absl::StrCat("at most steps (", r.steps, ")"),
                    static_cast<int64_t>(*v));
    }
  }
  // The splits the metrics were taken on are the dataset's.
  if (r.train.sequences != f.train_sequences) {
    return Refuse("train.sequences",
                  absl::StrCat("facts.train_sequences (", f.train_sequences, ")"),
                  r.train.sequences);
  }
  if (r.test.sequences != f.test_sequences) {
    return Refuse("test.sequences", absl::StrCat("facts.test_sequences (", f.test_sequences, ")"),
                  r.test.sequences);
  }
  // Sizes the spec determines, by its kind (dataset_kinds.h).
  const DatasetKindRow* kind = FindDatasetKind(d.kind);
  if (kind == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("the task's dataset.kind ", static_cast<int>(d.kind), " is unknown"));
  }
  RETURN_IF_ERROR(kind->check_fact_sizes(d, f));
  // A dataset without a test split reports none.
  if (!kind->has_test_split(d) && f.test_sequences != 0) {
    return Refuse("facts.test_sequences",
                  absl::StrCat("0 (the task's ", kind->name, " dataset has no test split)"),
                  f.test_sequences);
  }
  // Tokens are m-bit vectors: there are at most 2^m distinct queries.
  const int64_t tokens = d.m >= 62 ? INT64_MAX : int64_t{1} << d.m;
  if (f.distinct_queries > tokens) {
    return Refuse("facts.distinct_queries", absl::StrCat("at most 2^m = ", tokens),
                  f.distinct_queries);
  }
  // The theory bounds exist for the kinds whose row says so (witness
  // families); there the upper bound is the number of distinct queries and
  // lies above the lower.
  if (!kind->has_rank_bounds) {
    if (f.rank_lower_bound != 0) {
      return Refuse("facts.rank_lower_bound",
                    absl::StrCat("0 (no bound for the task's ", Name(d.kind), " dataset)"),
                    f.rank_lower_bound);
    }
    if (f.rank_upper_bound != 0) {
      return Refuse("facts.rank_upper_bound",
                    absl::StrCat("0 (no bound for the task's ", Name(d.kind), " dataset)"),
                    f.rank_upper_bound);
    }
  } else {
    if (f.rank_upper_bound != f.distinct_queries) {
      return Refuse("facts.rank_upper_bound",
                    absl::StrCat("facts.distinct_queries (", f.distinct_queries, ")"),
                    f.rank_upper_bound);
    }
    if (f.rank_lower_bound > f.rank_upper_bound) {
      return Refuse("facts.rank_lower_bound",
                    absl::StrCat("at most facts.rank_upper_bound (", f.rank_upper_bound, ")"),
                    f.rank_lower_bound);
    }
  }
  // The learning curve: one point per evaluation the run made, on the
  // splits the dataset has.
  RETURN_IF_ERROR(CheckCurve(r.curve, r.steps, task.train.eval_every, f.test_sequences > 0));
  // The final loss is taken over the whole train split with the final
  // parameters, as the train metrics are: a loss of 0 is every output on
  // its target, so every sequence exact.
  if (r.final_loss == 0 && r.train.error != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "result.train.error must be 0 when final_loss is 0 (the loss over the same split with "
        "the same parameters), got ",
        r.train.error));
  }
  return absl::OkStatus();
}

}  // namespace ranksweep::server
