// The fused CPU head (token_kernel.h) against the unfused head in double:
// readouts, the one-pass training loss and every parameter gradient, at
// the OOD sweeps' widths too; what it refuses and where it applies.
#include "worker/trainer/token_kernel.h"

#include <torch/utils.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/trainer/heads.h"
#include "worker/trainer/heads_test_fixture.h"
#include "worker/trainer/short_attention.h"

namespace ranksweep::trainer {
namespace {

// A minibatch of the sequences of `ti`: the same for every seed (shared)
// or drawn per seed, as indices [1 or S, B, N] and tokens [S, B, N, m].
struct Minibatch {
  torch::Tensor idx, x;
};
Minibatch MinibatchOf(const TokenIndex& ti, bool shared, int64_t s) {
  const int64_t b = ti.index.size(0), n = ti.index.size(1), m = ti.table.size(1);
  Minibatch mb;
  mb.idx = shared ? ti.index.unsqueeze(0)
                  : ti.index.index_select(0, torch::randint(0, b, {s * b}).to(torch::kLong))
                        .view({s, b, n});
  mb.x = ti.table.index_select(0, mb.idx.reshape({-1}))
             .view({mb.idx.size(0), b, n, m})
             .expand({s, b, n, m});
  return mb;
}

// Each of `fused` (output or loss, then every parameter gradient) as close
// to `want` (the unfused head in double) as the unfused head in float is,
// within rounding.
void ExpectAsCloseAsUnfused(const std::vector<torch::Tensor>& want,
                            const std::vector<torch::Tensor>& unfused,
                            const std::vector<torch::Tensor>& fused, const std::string& what) {
  ASSERT_EQ(fused.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(fused[i].sizes(), want[i].sizes()) << what << " tensor " << i;
    const double scale = std::max(1.0, want[i].abs().max().item<double>());
    const double unfused_error = (unfused[i] - want[i]).abs().max().item<double>();
    EXPECT_LE((fused[i] - want[i]).abs().max().item<double>(),
              std::max(4 * unfused_error, 1e-5 * scale))
        << what << " tensor " << i << " (0 = output or loss)";
  }
}

// The fused CPU head (token_kernel.h) against the unfused head in double,
// output and every parameter gradient: as close as the unfused head in
// float is, within rounding. Rank 200 makes several blocks per seed, one
// seed with two threads several chunks per seed; shared and per-seed
// minibatches, both readouts, every kind it applies to.
TEST(TokenKernelTest, FusedPathMatchesTheUnfusedHeadInDouble) {
  struct Case {
    HeadKind kind;
    FeatureMap map;
    int rank;
    int out_dim;
    int seeds;
  };
  std::vector<Case> cases;
  for (FeatureMap f : {FeatureMap::kEluPlusOne, FeatureMap::kReluEps, FeatureMap::kExp}) {
    cases.push_back({HeadKind::kKernel, f, 4, 1, 3});
    cases.push_back({HeadKind::kKernel, f, 4, 6, 3});
  }
  cases.push_back({HeadKind::kKernel, FeatureMap::kEluPlusOne, 200, 1, 3});
  cases.push_back({HeadKind::kKernel, FeatureMap::kEluPlusOne, 200, 1, 1});
  cases.push_back({HeadKind::kSignedKernel, FeatureMap::kEluPlusOne, 4, 1, 3});
  cases.push_back({HeadKind::kSoftmax, FeatureMap::kEluPlusOne, 0, 1, 3});
  cases.push_back({HeadKind::kSoftmax, FeatureMap::kEluPlusOne, 0, 6, 1});
  const int threads = at::get_num_threads();
  at::set_num_threads(2);
  torch::manual_seed(8);
  const int64_t b = 150, n = 3, m = 5;
  std::vector<uint64_t> tokens;
  for (int64_t i = 0; i < b * n; ++i) tokens.push_back(static_cast<uint64_t>(i * 11 % 32));
  const TokenIndex ti = IndexTokens(tokens, b, n, m, torch::kCPU);
  for (const Case& c : cases) {
    HeadConfig config = Config(c.kind, c.map, c.rank);
    config.hidden = {};
    config.out_dim = c.out_dim;
    std::vector<uint64_t> seeds;
    for (int s = 0; s < c.seeds; ++s) seeds.push_back(20 + s);
    const int64_t s = c.seeds;
    for (bool shared : {true, false}) {
      const Minibatch mb = MinibatchOf(ti, shared, s);
      const torch::Tensor& idx = mb.idx;
      const torch::Tensor& x = mb.x;
      const torch::Tensor weight = torch::randn({s, b, n, c.out_dim}, torch::kFloat64);
      auto head = MakeHead(config, seeds);
      if (c.kind == HeadKind::kSoftmax) {  // sharper than at the start of training
        auto* softmax = dynamic_cast<SoftmaxHeadImpl*>(head.get());
        torch::NoGradGuard no_grad;
        softmax->inv_tau().copy_(torch::linspace(0.5, 2.0, s));
      }
      auto run = [&](torch::ScalarType type, bool fused) {
        head->to(type);
        for (auto& p : head->parameters()) p.mutable_grad() = torch::Tensor();
        torch::Tensor out =
            fused ? head->ForwardIndexed(ti.table, idx, AttentionHeadImpl::Path::kFused)
                  : head->forward(x.to(type));
        (out * weight.to(type)).sum().backward();
        std::vector<torch::Tensor> got = {out.detach().to(torch::kFloat64)};
        for (auto& p : head->parameters()) got.push_back(p.grad().to(torch::kFloat64));
        return got;
      };
      const std::vector<torch::Tensor> want = run(torch::kFloat64, false);
      const std::vector<torch::Tensor> unfused = run(torch::kFloat32, false);
      ASSERT_TRUE(head->UsesTokenKernel(ti.table, n));
      ExpectAsCloseAsUnfused(want, unfused, run(torch::kFloat32, true),
                             absl::StrCat("kind ", Name(c.kind), " map ", Name(c.map), " rank ",
                                          c.rank, " out ", c.out_dim, " seeds ", s, " shared ",
                                          shared));
    }
  }
  at::set_num_threads(threads);
}

// The one-pass training loss (IndexedMseLoss) against the loss formed from
// the unfused head's readouts in double: value and every parameter
// gradient, as close as the unfused head in float is. Per-seed and shared
// targets; a weight that leaves the first position unscored; ranks below
// and above one vector of features; every feature map; tokens that repeat
// (32 of them in 360 positions: maps formed once per table row) and tokens
// that hardly do (m = 8: maps formed per position).
TEST(TokenKernelTest, OnePassMseLossMatchesTheUnfusedLossInDouble) {
  torch::manual_seed(9);
  const int64_t b = 120, n = 3, s = 3;
  struct Case {
    HeadKind kind;
    FeatureMap map;
    int rank;
  };
  const std::vector<Case> cases = {{HeadKind::kKernel, FeatureMap::kEluPlusOne, 150},
                                   {HeadKind::kKernel, FeatureMap::kEluPlusOne, 4},
                                   {HeadKind::kKernel, FeatureMap::kReluEps, 20},
                                   {HeadKind::kKernel, FeatureMap::kExp, 20},
                                   {HeadKind::kSignedKernel, FeatureMap::kEluPlusOne, 20},
                                   {HeadKind::kSoftmax, FeatureMap::kEluPlusOne, 0}};
  for (int m : {5, 8}) {
    std::vector<uint64_t> tokens;
    for (int64_t i = 0; i < b * n; ++i) {
      tokens.push_back(static_cast<uint64_t>(i * (m == 5 ? 7 : 37) % (int64_t{1} << m)));
    }
    const TokenIndex ti = IndexTokens(tokens, b, n, m, torch::kCPU);
    ASSERT_EQ(ti.table.size(0), m == 5 ? 32 : 256);
    for (const Case& c : cases) {
      for (bool shared : {true, false}) {
        HeadConfig config = Config(c.kind, c.map, c.rank);
        config.m = m;
        config.value_dim = m;
        config.score_dim = m;
        config.hidden = {};
        const Minibatch mb = MinibatchOf(ti, shared, s);
        const torch::Tensor& idx = mb.idx;
        const torch::Tensor& x = mb.x;
        const torch::Tensor targets =
            torch::randint(0, 4, {idx.size(0), b, n}).to(torch::kFloat32);
        const torch::Tensor weight = torch::tensor({0.0f, 0.5f, 1.5f}) / static_cast<float>(b);
        auto head = MakeHead(config, {30, 31, 32});
        auto run = [&](torch::ScalarType type, bool fused) {
          head->to(type);
          for (auto& p : head->parameters()) p.mutable_grad() = torch::Tensor();
          torch::Tensor loss;
          if (fused) {
            loss = head->IndexedMseLoss(ti.table, idx, targets, weight);
            EXPECT_TRUE(loss.defined());
          } else {
            const torch::Tensor d = head->forward(x.to(type)).squeeze(-1) - targets.to(type);
            loss = (d * d * weight.to(type)).sum();
          }
          loss.backward();
          std::vector<torch::Tensor> got = {loss.detach().to(torch::kFloat64)};
          for (auto& p : head->parameters()) got.push_back(p.grad().to(torch::kFloat64));
          return got;
        };
        const std::vector<torch::Tensor> want = run(torch::kFloat64, false);
        const std::vector<torch::Tensor> unfused = run(torch::kFloat32, false);
        ExpectAsCloseAsUnfused(want, unfused, run(torch::kFloat32, true),
                               absl::StrCat("kind ", Name(c.kind), " map ", Name(c.map), " rank ",
                                            c.rank, " m ", m, " shared ", shared));
      }
    }
  }
  const int64_t m = 5;
  std::vector<uint64_t> tokens;
  for (int64_t i = 0; i < b * n; ++i) tokens.push_back(static_cast<uint64_t>(i * 7 % 32));
  const TokenIndex ti = IndexTokens(tokens, b, n, m, torch::kCPU);
  // Cross-entropy readouts (out_dim > 1) are not this path's.
  HeadConfig config = Config(HeadKind::kKernel, FeatureMap::kEluPlusOne, 4);
  config.hidden = {};
  config.out_dim = 6;
  EXPECT_FALSE(MakeHead(config, {1})
                   ->IndexedMseLoss(ti.table, ti.index.unsqueeze(0),
                                    torch::zeros({1, b, n}), torch::ones({n}))
                   .defined());
}

// The OOD sweeps' widths (m = 12, 16, 24; score and value width m), which
// the fused path runs with the widths as compile-time constants: the
// softmax head and the kernel head at rank 1 (and rank 16: constant widths
// at m = 16, run-time ones otherwise), readouts and gradients through
// ForwardIndexed and the one-pass loss through IndexedMseLoss, each against
// the unfused head in double.
TEST(TokenKernelTest, OodWidthsMatchTheUnfusedHeadInDouble) {
  torch::manual_seed(10);
  const int64_t b = 90, n = 3, s = 2;
  for (int m : {12, 16, 24}) {
    std::vector<uint64_t> tokens;
    for (int64_t i = 0; i < b * n; ++i) {
      tokens.push_back(static_cast<uint64_t>((i * 2654435761u) % (uint64_t{1} << m)));
    }
    const TokenIndex ti = IndexTokens(tokens, b, n, m, torch::kCPU);
    for (auto [kind, rank] : {std::pair{HeadKind::kSoftmax, 0}, std::pair{HeadKind::kKernel, 1},
                              std::pair{HeadKind::kKernel, 16}}) {
      HeadConfig config = Config(kind, FeatureMap::kEluPlusOne, rank);
      config.m = m;
      config.value_dim = m;
      config.score_dim = m;
      config.hidden = {};
      const Minibatch mb = MinibatchOf(ti, /*shared=*/false, s);
      const torch::Tensor targets = torch::randint(0, 4, {s, b, n}).to(torch::kFloat32);
      const torch::Tensor weight = torch::tensor({0.0f, 0.5f, 1.5f}) / static_cast<float>(b);
      const torch::Tensor out_weight = torch::randn({s, b, n, 1}, torch::kFloat64);
      auto head = MakeHead(config, {40, 41});
      if (kind == HeadKind::kSoftmax) {  // sharper than at the start of training
        auto* softmax = dynamic_cast<SoftmaxHeadImpl*>(head.get());
        torch::NoGradGuard no_grad;
        softmax->inv_tau().copy_(torch::linspace(0.7, 1.6, s));
      }
      ASSERT_TRUE(head->UsesTokenKernel(ti.table, n));
      // loss: the one-pass loss (fused) or its unfused value; else the
      // readouts, with sum(out * out_weight) backpropagated.
      auto run = [&](torch::ScalarType type, bool fused, bool loss) {
        head->to(type);
        for (auto& p : head->parameters()) p.mutable_grad() = torch::Tensor();
        torch::Tensor value;
        if (loss && fused) {
          value = head->IndexedMseLoss(ti.table, mb.idx, targets, weight);
        } else if (loss) {
          const torch::Tensor d = head->forward(mb.x.to(type)).squeeze(-1) - targets.to(type);
          value = (d * d * weight.to(type)).sum();
        } else {
          value = fused ? head->ForwardIndexed(ti.table, mb.idx, AttentionHeadImpl::Path::kFused)
                        : head->forward(mb.x.to(type));
        }
        (loss ? value : (value * out_weight.to(type)).sum()).backward();
        std::vector<torch::Tensor> got = {value.detach().to(torch::kFloat64)};
        for (auto& p : head->parameters()) got.push_back(p.grad().to(torch::kFloat64));
        return got;
      };
      for (bool loss : {false, true}) {
        const std::vector<torch::Tensor> want = run(torch::kFloat64, false, loss);
        const std::vector<torch::Tensor> unfused = run(torch::kFloat32, false, loss);
        ExpectAsCloseAsUnfused(want, unfused, run(torch::kFloat32, true, loss),
                               absl::StrCat("kind ", Name(kind), " rank ", rank, " m ", m,
                                            loss ? " loss" : " readouts"));
      }
    }
  }
}

// The fused kernel takes tokens of 0/1 inputs only (its first layer sums
// weight rows) and rows of its table only: anything else is refused with
// the reason, before any work.
TEST(TokenKernelTest, RefusesATableOtherThanZeroOneAndRowsOutsideIt) {
  TokenKernelShape shape;
  shape.score = 2;
  shape.dv = 2;
  const torch::Tensor w = torch::zeros({1, 3, shape.width()});  // m = 2
  const torch::Tensor idx = torch::tensor({0, 1, 1}, torch::kLong).view({1, 3});
  const torch::Tensor binary = torch::tensor({0.0f, 1.0f, 1.0f, 1.0f}).view({2, 2});
  EXPECT_EQ(TokenKernelForward(binary, idx, w, torch::Tensor(), 3, shape).sizes(),
            (std::vector<int64_t>{1, 1, 3, 1}));
  const torch::Tensor halves = torch::tensor({0.0f, 0.5f, 1.0f, 1.0f}).view({2, 2});
  try {
    TokenKernelForward(halves, idx, w, torch::Tensor(), 3, shape);
    ADD_FAILURE() << "a table with 0.5 was accepted";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("the table must hold only 0 and 1"), std::string::npos)
        << e.what();
  }
  const torch::Tensor outside = torch::tensor({0, 1, 2}, torch::kLong).view({1, 3});
  try {
    TokenKernelForward(binary, outside, w, torch::Tensor(), 3, shape);
    ADD_FAILURE() << "row 2 of a 2-row table was accepted";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("idx must hold rows of the table, 0 to 1"),
              std::string::npos)
        << e.what();
  }
}

// Where the fused path applies: single-layer kernel heads with elu+1,
// relu+eps or exp features, signed kernels and softmax heads, float on the
// CPU; not hidden layers, several heads, softplus or FAVOR+, double.
TEST(TokenKernelTest, AppliesToSingleLayerHeadsInFloat) {
  const torch::Tensor table = torch::randint(0, 2, {10, 5}).to(torch::kFloat32);
  auto uses = [&](HeadKind kind, FeatureMap map, std::vector<int> hidden, int heads) {
    HeadConfig config = Config(kind, map, 4, heads);
    config.hidden = hidden;
    return MakeHead(config, {1})->UsesTokenKernel(table, 3);
  };
  EXPECT_TRUE(uses(HeadKind::kKernel, FeatureMap::kEluPlusOne, {}, 1));
  EXPECT_TRUE(uses(HeadKind::kKernel, FeatureMap::kReluEps, {}, 1));
  EXPECT_TRUE(uses(HeadKind::kKernel, FeatureMap::kExp, {}, 1));
  EXPECT_TRUE(uses(HeadKind::kSignedKernel, FeatureMap::kEluPlusOne, {}, 1));
  EXPECT_TRUE(uses(HeadKind::kSoftmax, FeatureMap::kEluPlusOne, {}, 1));
  EXPECT_FALSE(uses(HeadKind::kKernel, FeatureMap::kEluPlusOne, {7}, 1));
  EXPECT_FALSE(uses(HeadKind::kKernel, FeatureMap::kSoftplus, {}, 1));
  EXPECT_FALSE(uses(HeadKind::kKernel, FeatureMap::kFavorPlus, {}, 1));
  EXPECT_FALSE(uses(HeadKind::kMultiheadKernel, FeatureMap::kEluPlusOne, {}, 2));
  HeadConfig config = Config(HeadKind::kKernel, FeatureMap::kEluPlusOne, 4);
  config.hidden = {};
  auto head = MakeHead(config, {1});
  EXPECT_FALSE(head->UsesTokenKernel(table.to(torch::kFloat64), 3));
  EXPECT_FALSE(head->UsesTokenKernel(table, kShortAttentionMaxLen + 1));
}

}  // namespace
}  // namespace ranksweep::trainer
