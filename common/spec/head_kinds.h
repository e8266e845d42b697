// The registry of attention heads: one row per head kind holds what the
// spec side knows of it -- its name, whether it has a rank, how it is
// labelled, which of the head fields it reads, the constructions it can be
// built as, why the single-head rank bound does not apply to it, and the
// shape family the memory estimate follows. Validation, labels, the memory
// estimate and the coordinator's analysis read the row, so none of them
// names a kind. The trainer registers how a kind is built
// (worker/trainer/heads.cc, kHeadMakers).
//
// Adding a head (docs/ARCHITECTURE.md, "How to add a head"): a HeadKind
// value and its row in head_kinds.cc, its module and maker in the trainer,
// its proto enum value, and tests.
//
// Thread-safety: the rows are constant.
#ifndef RANKSWEEP_COMMON_SPEC_HEAD_KINDS_H_
#define RANKSWEEP_COMMON_SPEC_HEAD_KINDS_H_

#include <vector>

#include "common/spec/spec.h"

namespace ranksweep {

struct HeadKindRow {
  HeadKind kind;
  const char* name;  // as specs and the CLI write it
  // Its rank r is swept (a ranked head): cells per rank, transitions.
  bool has_rank;
  // It reads head.feature_map (and the label shows it: "kernel/elu1").
  bool has_feature_map;
  // It reads head.num_heads, 1..SpecLimits::kMaxNumHeads ("x4" in the label).
  bool has_num_heads;
  // It reads head.score_dim ("/d8" in the label when set): dense softmax
  // scores, whose memory grows with N^2 and not with a rank.
  bool softmax_scores;
  // Its features are signed: no FAVOR+ projection.
  bool signed_features;
  // The constructions (head.construction other than none) it can be built as.
  std::vector<Construction> constructions;
  // Why the single-head rank bound does not apply to it; "" when it does
  // (the analysis's NoBoundReason).
  const char* no_bound;
};

// The row of `kind`; nullptr for a value no row has (a spec built in code).
const HeadKindRow* FindHeadKind(HeadKind kind);
// Every row, in HeadKind order.
const std::vector<HeadKindRow>& HeadKinds();

}  // namespace ranksweep

#endif  // RANKSWEEP_COMMON_SPEC_HEAD_KINDS_H_
