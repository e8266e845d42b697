// What the trainer's head tests share (heads_test.cc, short_attention_test.cc,
// token_kernel_test.cc): a small head configuration of any kind.
// Tests only.
#ifndef RANKSWEEP_WORKER_TRAINER_HEADS_TEST_FIXTURE_H_
#define RANKSWEEP_WORKER_TRAINER_HEADS_TEST_FIXTURE_H_

#include "common/spec/spec.h"
#include "worker/trainer/heads.h"

namespace ranksweep::trainer {

// m = 5 tokens, value and score width 5, one hidden layer of 7.
inline HeadConfig Config(HeadKind kind, FeatureMap f, int rank, int heads = 1) {
  HeadConfig c;
  c.kind = kind;
  c.feature_map = f;
  c.m = 5;
  c.rank = rank;
  c.num_heads = heads;
  c.value_dim = 5;
  c.score_dim = 5;
  c.hidden = {7};
  return c;
}

}  // namespace ranksweep::trainer

#endif  // RANKSWEEP_WORKER_TRAINER_HEADS_TEST_FIXTURE_H_
