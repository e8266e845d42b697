// The rows and groups the writers' tests (format_test.cc,
// format_groups_test.cc) print. Tests only.
#ifndef RANKSWEEP_CLIENT_FORMAT_TEST_UTIL_H_
#define RANKSWEEP_CLIENT_FORMAT_TEST_UTIL_H_

#include <cstdint>
#include <string>

#include "ranksweep/v1/ranksweep.pb.h"

namespace ranksweep::client {

// A done row of sweep s-1 (cell id: seed + 10), trained by worker w-1 in
// its first attempt under lease 42; 64 train sequences, `test_sequences`
// test ones.
inline v1::ResultRow DoneRow(const std::string& head, int rank, uint64_t seed,
                             double train_err, int64_t test_sequences, double test_err) {
  v1::ResultRow r;
  r.set_sweep_id("s-1");
  r.set_cell_id(static_cast<int64_t>(seed) + 10);
  r.set_head(head);
  r.set_rank(rank);
  r.set_seed(seed);
  r.set_state(v1::CELL_STATE_DONE);
  r.set_worker_id("w-1");
  r.set_attempt(1);
  r.set_lease_id(42);
  auto* res = r.mutable_result();
  res->set_seed(seed);
  res->mutable_train()->set_sequences(64);
  res->mutable_train()->set_error(train_err);
  res->mutable_train()->set_position_accuracy(1.0 - train_err / 2);
  res->mutable_test()->set_sequences(test_sequences);
  res->mutable_test()->set_error(test_err);
  res->set_steps(150);
  res->set_wall_seconds(2.25);
  res->set_device("cpu");
  r.mutable_worker_version()->set_build_id("0.1.0+abc");
  return r;
}

// kernel/elu1 at rank 4, all three seeds done, mean train error 0.25.
inline v1::ResultGroup CompleteGroup() {
  v1::ResultGroup g;
  g.set_head("kernel/elu1");
  g.set_rank(4);
  g.set_n(3);
  g.set_expected(3);
  g.mutable_train_error()->set_mean(0.25);
  return g;
}

}  // namespace ranksweep::client

#endif  // RANKSWEEP_CLIENT_FORMAT_TEST_UTIL_H_
