#include "common/spec/head_kinds.h"

namespace ranksweep {

const std::vector<HeadKindRow>& HeadKinds() {
  static const std::vector<HeadKindRow>* rows = new std::vector<HeadKindRow>{
      // Normalized nonnegative kernel attention of rank r: the paper's head.
      {HeadKind::kKernel, "kernel", /*has_rank=*/true, /*has_feature_map=*/true,
       /*has_num_heads=*/false, /*softmax_scores=*/false, /*signed_features=*/false,
       {Construction::kRank1, Construction::kIndicator}, ""},
      // Dense softmax attention: no rank.
      {HeadKind::kSoftmax, "softmax", false, false, false, true, false,
       {Construction::kSoftmaxExact}, "softmax"},
      // Kernel attention with unconstrained (signed) features.
      {HeadKind::kSignedKernel, "signed_kernel", true, false, false, false, true, {}, "signed"},
      // num_heads kernel heads of rank r each.
      {HeadKind::kMultiheadKernel, "multihead_kernel", true, true, true, false, false, {},
       "multi-head"},
  };
  return *rows;
}

const HeadKindRow* FindHeadKind(HeadKind kind) {
  for (const HeadKindRow& row : HeadKinds()) {
    if (row.kind == kind) return &row;
  }
  return nullptr;
}

}  // namespace ranksweep
