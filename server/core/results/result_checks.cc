#include "server/core/results/result_checks.h"

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/spec/curve.h"
#include "common/status_macros.h"

namespace ranksweep::server {
namespace {

absl::Status Refuse(const std::string& field, const std::string& want, int64_t got) {
  return absl::InvalidArgumentError(absl::StrCat("result.", field, " must be ", want, ", got ", got));
}

// "exhaustive dataset, m=2, seq_len=3": what determines a size.
std::string DatasetText(const DatasetSpec& d) {
  return absl::StrCat(Name(d.kind), " dataset, m=", d.m, ", seq_len=", d.seq_len);
}

}  // namespace

absl::Status CheckResultAgainstTask(const SeedResult& r, const TaskSpec& task) {
  const DatasetSpec& d = task.dataset;
  const DatasetFacts& f = r.facts;

  // Steps: the first exact evaluation happened during the run.
  if (r.first_exact_step.has_value() && *r.first_exact_step > r.steps) {
    return Refuse("first_exact_step", absl::StrCat("at most steps (", r.steps, ")"),
                  *r.first_exact_step);
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
  // Sizes the spec determines.
  switch (d.kind) {
    case DatasetKind::kExhaustive: {
      const int64_t all = int64_t{1} << (d.m * d.seq_len);  // m * seq_len <= 18
      if (f.train_sequences != all) {
        return Refuse("facts.train_sequences", absl::StrCat(all, " (", DatasetText(d), ")"),
                      f.train_sequences);
      }
      break;
    }
    case DatasetKind::kWitness:
      if (d.num_queries > 0) {
        const int64_t n = d.num_queries;
        if (f.train_sequences != n * (2 * n - 1)) {
          return Refuse("facts.train_sequences",
                        absl::StrCat(n * (2 * n - 1), " (a witness family of num_queries=", n,
                                     ": n(2n-1))"),
                        f.train_sequences);
        }
        // The queries c_i, and with every position scored the keys (the
        // complements of the c_j) too.
        const int64_t most = d.final_query_only ? n : 2 * n;
        if (f.distinct_queries > most) {
          return Refuse("facts.distinct_queries",
                        d.final_query_only
                            ? absl::StrCat("at most num_queries (", n, ")")
                            : absl::StrCat("at most 2 * num_queries (", most,
                                           ": queries and keys are scored)"),
                        f.distinct_queries);
        }
      }
      break;
    case DatasetKind::kPool:
      // Either split builds exactly train_size and test_size sequences.
      if (f.train_sequences != d.train_size) {
        return Refuse("facts.train_sequences",
                      absl::StrCat("the task's train_size (", d.train_size, ")"),
                      f.train_sequences);
      }
      if (f.test_sequences != d.test_size) {
        return Refuse("facts.test_sequences",
                      d.test_size == 0
                          ? std::string("0 (the task's pool dataset has no test split)")
                          : absl::StrCat("the task's test_size (", d.test_size, ")"),
                      f.test_sequences);
      }
      break;
  }
  // Only a pool dataset has a test split.
  if (d.kind != DatasetKind::kPool && f.test_sequences != 0) {
    return Refuse("facts.test_sequences",
                  absl::StrCat("0 (the task's ", Name(d.kind), " dataset has no test split)"),
                  f.test_sequences);
  }
  // Tokens are m-bit vectors: there are at most 2^m distinct queries.
  const int64_t tokens = d.m >= 62 ? INT64_MAX : int64_t{1} << d.m;
  if (f.distinct_queries > tokens) {
    return Refuse("facts.distinct_queries", absl::StrCat("at most 2^m = ", tokens),
                  f.distinct_queries);
  }
  // The theory bounds exist for witness families only; there the upper
  // bound is the number of distinct queries and lies above the lower.
  if (d.kind != DatasetKind::kWitness) {
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
