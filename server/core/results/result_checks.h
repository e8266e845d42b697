// The cross-field checks CompleteTasks runs on every result, against the
// task spec the coordinator itself handed out (MakeTaskSpec of the cell's
// sweep, head, rank and recipe), after the range checks of
// common/spec/result_validation.h. A result that passes the ranges can
// still be impossible for its task: more steps than it ran, a dataset of
// another size, a test split the dataset does not have. docs/SECURITY.md,
// "Results a worker sends", lists every check in one table, and
// tests/reliability/hostile_pool_test.cc sends one result per row through a
// real ranksweepd.
//
// Only what the spec determines is checked: nothing here runs the dataset
// generator, so sizes that depend on it (a pool's sequences, a witness
// family without num_queries, the distinct queries, a witness family's rank
// lower bound) are checked only as far as the spec bounds them.
//
// Errors: InvalidArgument naming the field, what the task determines and
// the value received. Thread-safety: a pure function.
#ifndef RANKSWEEP_SERVER_CORE_RESULTS_RESULT_CHECKS_H_
#define RANKSWEEP_SERVER_CORE_RESULTS_RESULT_CHECKS_H_

#include "absl/status/status.h"
#include "common/spec/spec.h"

namespace ranksweep::server {

// OK when `result` is possible for a run of `task`; else the first broken
// check, as InvalidArgument ("result.facts.train_sequences must be 64 (the
// task's exhaustive dataset, m=2, seq_len=3), got 7").
absl::Status CheckResultAgainstTask(const SeedResult& result, const TaskSpec& task);

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_CORE_RESULTS_RESULT_CHECKS_H_
