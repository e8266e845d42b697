#include "client/presets.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/spec/spec_json.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ranksweep::client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(PresetsTest, TheEightPresetsAreEmbedded) {
  EXPECT_THAT(PresetNames(),
              ElementsAre("law", "lengths", "loopholes", "ood-tokens-large",
                          "ood-tokens-medium", "ood-tokens-small", "ood", "witness"));
}

TEST(PresetsTest, EveryPresetParsesAndValidatesAtScaleOneAndOneTenth) {
  for (const std::string& name : PresetNames()) {
    for (double scale : {1.0, 0.1}) {
      absl::StatusOr<ResolvedPreset> p = ResolvePreset(name, scale);
      ASSERT_TRUE(p.ok()) << name << " at " << scale << ": " << p.status();
      ASSERT_FALSE(p->sweeps.empty()) << name;
      EXPECT_EQ(p->resolution.size(), p->sweeps.size());
      for (const SweepSpec& s : p->sweeps) {
        EXPECT_TRUE(ValidateSweepSpec(s).ok()) << name;
        if (scale == 1.0) {
          // Ranks 1..256 in powers of two, at least 5 seeds, softmax included;
          // law and ood stop at 64 and 128 (past their transitions) with 3
          // seeds, to train in minutes on 2 cores.
          if (name == "law") {
            EXPECT_THAT(s.ranks, ElementsAre(1, 2, 4, 8, 16, 32, 64));
            EXPECT_EQ(SweepSeeds(s).size(), 3u);
          } else if (name == "ood") {
            EXPECT_THAT(s.ranks, ElementsAre(1, 2, 4, 8, 16, 32, 64, 128));
            EXPECT_EQ(SweepSeeds(s).size(), 3u);
          } else {
            EXPECT_THAT(s.ranks, ElementsAre(1, 2, 4, 8, 16, 32, 64, 128, 256)) << name;
            EXPECT_GE(SweepSeeds(s).size(), 5u) << name;
          }
          bool softmax = false;
          for (const HeadSpec& h : s.heads) softmax |= h.kind == HeadKind::kSoftmax;
          EXPECT_TRUE(softmax) << name;
        }
      }
    }
  }
}

TEST(PresetsTest, LengthsIsThreeSweepsOnePerSequenceLength) {
  absl::StatusOr<ResolvedPreset> p = ResolvePreset("lengths", 1.0);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->sweeps.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(p->sweeps[i].dataset.seq_len, i + 1);
    EXPECT_EQ(p->sweeps[i].dataset.kind, DatasetKind::kExhaustive);
    EXPECT_EQ(p->sweeps[i].name, "lengths-n" + std::to_string(i + 1));
    ASSERT_EQ(p->sweeps[i].heads.size(), 3u);
    EXPECT_EQ(p->sweeps[i].heads[1].construction, Construction::kRank1);
  }
}

TEST(PresetsTest, LoopholesVariantsReplaceHeadsAndSetFinalQuery) {
  absl::StatusOr<ResolvedPreset> p = ResolvePreset("loopholes", 1.0);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->sweeps.size(), 2u);
  EXPECT_EQ(p->sweeps[0].heads.size(), 4u);
  EXPECT_EQ(p->sweeps[0].heads[1].kind, HeadKind::kSignedKernel);
  EXPECT_EQ(p->sweeps[0].heads[2].kind, HeadKind::kMultiheadKernel);
  EXPECT_EQ(p->sweeps[0].heads[2].num_heads, 4);
  EXPECT_FALSE(p->sweeps[0].dataset.final_query_only);
  EXPECT_EQ(p->sweeps[1].heads.size(), 2u);
  EXPECT_TRUE(p->sweeps[1].dataset.final_query_only);
  EXPECT_EQ(p->sweeps[1].dataset.num_queries, 12);  // kept from the base spec
  // The final-query sweep's own recipe, under which softmax converged on
  // every seed measured, 0-29 (docs/TRAINER.md).
  EXPECT_EQ(p->sweeps[1].train.lr, 0.03);
  EXPECT_EQ(p->sweeps[1].train.weight_decay, 0.02);
  EXPECT_EQ(p->sweeps[1].train.batch_size, 32);
  EXPECT_EQ(p->sweeps[1].train.schedule, LrSchedule::kCosine);
  EXPECT_EQ(p->sweeps[1].train.max_steps, 6000);
  EXPECT_EQ(p->sweeps[0].train.schedule, LrSchedule::kConstant);
  EXPECT_EQ(p->sweeps[0].train.max_steps, 3000);
}

TEST(PresetsTest, ScaleShrinksExactlyAsDocumented) {
  absl::StatusOr<ResolvedPreset> p = ResolvePreset("witness", 0.1);
  ASSERT_TRUE(p.ok()) << p.status();
  const SweepSpec& s = p->sweeps[0];
  EXPECT_EQ(s.name, "witness-s0.1");
  EXPECT_THAT(s.ranks, ElementsAre(1, 16, 256));
  EXPECT_EQ(s.seed_count, 2);
  EXPECT_EQ(s.train.max_steps, 3000);
  EXPECT_EQ(s.dataset.num_queries, 6);
  EXPECT_EQ(p->resolution[0],
            "witness-s0.1: ranks 1,16,256 (of 9); seeds 2 (of 5); max_steps 3000 (of 30000); "
            "dataset.num_queries 6 (of 26); 8 cells");

  p = ResolvePreset("witness", 0.5);
  ASSERT_TRUE(p.ok());
  EXPECT_THAT(p->sweeps[0].ranks, ElementsAre(1, 4, 16, 64, 256));
  EXPECT_EQ(p->sweeps[0].seed_count, 3);
  EXPECT_EQ(p->sweeps[0].dataset.num_queries, 13);

  p = ResolvePreset("ood-tokens-large", 0.1);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->sweeps[0].dataset.pool_size, 2000);
  EXPECT_EQ(p->sweeps[0].dataset.train_size, 3000);
  EXPECT_EQ(p->sweeps[0].dataset.test_size, 500);

  p = ResolvePreset("witness", 1.0);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->sweeps[0].name, "witness");
  // The fewest queries whose family certifies the paper's bound of 8
  // (docs/WITNESS.md; the bound itself is pinned in dataset_test.cc).
  EXPECT_EQ(p->sweeps[0].dataset.num_queries, 26);
}

TEST(PresetsTest, ScaleKeepsTheWarmupsShareOfTheSteps) {
  absl::StatusOr<ResolvedPreset> p = ResolvePresetText(
      "w", "spec:\n  name: w\n  heads: [{kind: softmax}]\n  seed_count: 2\n"
           "  train: {max_steps: 3000, warmup_steps: 300, schedule: cosine}\n", 0.1);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->sweeps[0].train.max_steps, 300);
  EXPECT_EQ(p->sweeps[0].train.warmup_steps, 30);
  EXPECT_EQ(p->sweeps[0].train.schedule, LrSchedule::kCosine);
  EXPECT_THAT(p->resolution[0], HasSubstr("max_steps 300 (of 3000); warmup_steps 30 (of 300)"));
}

TEST(PresetsTest, OodPresetsSweepThreeLearningRates) {
  // The OOD presets cross every (head, rank, seed) with lr 0.01, 0.003 and
  // 0.001 at every scale; the budget is the base spec's (EXPERIMENTS.md,
  // "OOD scaling").
  struct Budget {
    const char* name;
    int max_steps;
    int eval_every;
  };
  for (const Budget& b : {Budget{"ood-tokens-small", 3000, 100},
                          Budget{"ood-tokens-medium", 6000, 200},
                          Budget{"ood-tokens-large", 10000, 250}}) {
    for (double scale : {1.0, 0.5}) {
      absl::StatusOr<ResolvedPreset> p = ResolvePreset(b.name, scale);
      ASSERT_TRUE(p.ok()) << b.name << ": " << p.status();
      ASSERT_EQ(p->sweeps.size(), 1u);
      const SweepSpec& s = p->sweeps[0];
      ASSERT_EQ(s.axes.size(), 1u) << b.name;
      EXPECT_EQ(s.axes[0].name, "lr");
      EXPECT_THAT(s.axes[0].values, ElementsAre(0.01, 0.003, 0.001)) << b.name;
      EXPECT_EQ(RecipeCount(s), 3);
      EXPECT_EQ(s.train.schedule, LrSchedule::kConstant) << b.name;
      EXPECT_EQ(s.train.early_stop_evals, 3) << b.name;
      if (scale == 1.0) {
        EXPECT_EQ(s.train.max_steps, b.max_steps) << b.name;
        EXPECT_EQ(s.train.eval_every, b.eval_every) << b.name;
      }
    }
  }
  // (9 ranks + softmax) x 5 seeds x 3 recipes; at 0.5 (5 ranks + softmax) x 3 x 3.
  absl::StatusOr<ResolvedPreset> p = ResolvePreset("ood-tokens-small", 1.0);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(GridCellCount(p->sweeps[0]), 150);
  p = ResolvePreset("ood-tokens-medium", 0.5);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(GridCellCount(p->sweeps[0]), 54);
  EXPECT_EQ(p->sweeps[0].train.max_steps, 3000);
}

TEST(PresetsTest, KeepFirstRecipeRunsTheOodPresetsAtLrPointZeroOneOnly) {
  absl::StatusOr<ResolvedPreset> p = ResolvePreset("ood-tokens-small", 1.0);
  ASSERT_TRUE(p.ok()) << p.status();
  SweepSpec s = p->sweeps[0];
  SweepSpec want = s;
  want.axes.clear();
  want.train.lr = 0.01;
  EXPECT_EQ(KeepFirstRecipe(&s), "lr 0.01 (of 0.01,0.003,0.001)");
  EXPECT_TRUE(s.axes.empty());
  EXPECT_EQ(s.train.lr, 0.01);
  EXPECT_EQ(RecipeCount(s), 1);
  // (9 ranks + softmax) x 5 seeds, a third of the preset's 150.
  EXPECT_EQ(GridCellCount(s), 50);
  EXPECT_EQ(SweepSpecToJson(s, -1), SweepSpecToJson(want, -1));
  EXPECT_TRUE(ValidateSweepSpec(s).ok()) << ValidateSweepSpec(s);
  // The presets without axes are left exactly as they are.
  for (const std::string& name : PresetNames()) {
    if (name.rfind("ood-tokens-", 0) == 0) continue;
    absl::StatusOr<ResolvedPreset> other = ResolvePreset(name, 1.0);
    ASSERT_TRUE(other.ok()) << name << ": " << other.status();
    for (SweepSpec& one : other->sweeps) {
      const std::string before = SweepSpecToJson(one, -1);
      EXPECT_EQ(KeepFirstRecipe(&one), "") << name;
      EXPECT_EQ(SweepSpecToJson(one, -1), before) << name;
    }
  }
}

// The law: one sweep with an m axis (every sequence of ({0,1}^m)^3 at each
// m), kept whole by --one-recipe, which drops training axes only.
TEST(PresetsTest, LawSweepsMAndOodPosesDisjointSequencesOfEveryToken) {
  absl::StatusOr<ResolvedPreset> p = ResolvePreset("law", 1.0);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->sweeps.size(), 1u);
  SweepSpec law = p->sweeps[0];
  EXPECT_EQ(law.dataset.kind, DatasetKind::kExhaustive);
  ASSERT_EQ(law.axes.size(), 1u);
  EXPECT_EQ(law.axes[0].name, "m");
  EXPECT_THAT(law.axes[0].values, ElementsAre(2, 3, 4, 5));
  EXPECT_EQ(KeepFirstRecipe(&law), "");
  EXPECT_EQ(RecipeCount(law), 4);

  p = ResolvePreset("ood", 1.0);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->sweeps.size(), 3u);
  const int want_m[] = {3, 4, 5}, want_train[] = {256, 2000, 8000}, want_test[] = {256, 2000, 4000};
  for (int i = 0; i < 3; ++i) {
    const DatasetSpec& d = p->sweeps[i].dataset;
    EXPECT_EQ(p->sweeps[i].name, absl::StrCat("ood-m", want_m[i]));
    EXPECT_EQ(d.split, PoolSplit::kSequences);
    EXPECT_EQ(d.pool_size, 0);  // every token
    EXPECT_EQ(d.weight, 0);
    EXPECT_EQ(d.m, want_m[i]);
    EXPECT_EQ(d.train_size, want_train[i]);
    EXPECT_EQ(d.test_size, want_test[i]);
    EXPECT_EQ(d.hard_share, 0);
  }
  for (const char* name : {"ood-tokens-small", "ood-tokens-medium", "ood-tokens-large"}) {
    p = ResolvePreset(name, 1.0);
    ASSERT_TRUE(p.ok()) << name << ": " << p.status();
    EXPECT_EQ(p->sweeps[0].dataset.split, PoolSplit::kTokens) << name;
  }
}

TEST(PresetsTest, BadScaleAndUnknownNameAreErrors) {
  for (double bad : {0.0, -0.5, 1.5}) {
    absl::StatusOr<ResolvedPreset> p = ResolvePreset("witness", bad);
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(p.status().message(), HasSubstr("--scale must be in (0, 1]"));
  }
  absl::StatusOr<ResolvedPreset> p = ResolvePreset("nope", 1.0);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(p.status().message(), HasSubstr("law, lengths, loopholes, ood-tokens-large, ood-tokens-medium, ood-tokens-small, ood, witness"));
}

TEST(PresetsTest, ABadVariantNamesTheSweep) {
  absl::StatusOr<ResolvedPreset> p = ResolvePresetText(
      "x", "spec:\n  name: x\n  heads: [{kind: softmax}]\n  seed_count: 1\nvariants:\n"
           "  - dataset: {m: 0}\n", 1.0);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(p.status().message(), HasSubstr("presets/x.yaml: sweep 0"));
  EXPECT_THAT(p.status().message(), HasSubstr("dataset.m"));
}

TEST(PresetsTest, ListShowsEveryPresetWithItsCells) {
  const std::string text = PresetsListText();
  EXPECT_THAT(text, HasSubstr("NAME"));
  for (const std::string& name : PresetNames()) EXPECT_THAT(text, HasSubstr(name));
  // witness: (9 ranks + softmax) x 5 seeds = 50 cells in one sweep.
  EXPECT_THAT(text, ::testing::ContainsRegex("\nwitness +1 +50  witness family"));
  // ood-tokens-small: (9 ranks + softmax) x 5 seeds x 3 learning rates.
  EXPECT_THAT(text, ::testing::ContainsRegex("\nood-tokens-small +1 +150  OOD, disjoint tokens"));
  // ood: 3 sweeps of (8 ranks + softmax) x 3 seeds; law: 4 values of m.
  EXPECT_THAT(text, ::testing::ContainsRegex("\nood +3 +81  OOD, disjoint sequences"));
  EXPECT_THAT(text, ::testing::ContainsRegex("\nlaw +1 +96  the law"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("invalid")));
}

}  // namespace
}  // namespace ranksweep::client
