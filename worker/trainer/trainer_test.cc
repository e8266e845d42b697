// The public trainer API: invalid specs, fused-vs-single equality,
// determinism, the witness phase transition, and the device boundary.
#include "worker/trainer/trainer.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <map>
#include <mutex>
#include <tuple>

#include "common/spec/result_metrics.h"
#include "common/spec/spec_json.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ranksweep::trainer {
namespace {

using ::testing::HasSubstr;

const RunOptions kCpu = {.device = "cpu"};

// How many of a run's seeds reach train error 0. Training claims are stated
// as "at least k of n seeds", with a margin below what one machine sees:
// the same seed's trajectory differs between CPUs and build types (vector
// widths, fused multiply-adds), so no test names the seeds that must get
// there.
int ExactSeeds(const TaskResult& r) {
  int exact = 0;
  for (const SeedResult& s : r.seeds) exact += s.train.error == 0.0 ? 1 : 0;
  return exact;
}

// The median of the seeds' train errors.
double MedianTrainError(const TaskResult& r) {
  std::vector<double> errors;
  for (const SeedResult& s : r.seeds) errors.push_back(s.train.error);
  std::sort(errors.begin(), errors.end());
  return errors.empty() ? 0.0 : errors[errors.size() / 2];
}

TaskSpec SmallTask() {
  TaskSpec t;
  t.dataset.kind = DatasetKind::kExhaustive;
  t.dataset.m = 3;
  t.dataset.seq_len = 3;
  t.head.kind = HeadKind::kKernel;
  t.rank = 4;
  t.train.lr = 0.02;
  t.train.max_steps = 120;
  t.train.eval_every = 20;
  t.seeds = {0, 1, 2};
  return t;
}

void ExpectInvalid(const TaskSpec& t, const std::string& field, const std::string& range) {
  auto r = RunTask(t, kCpu);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr(field));
  EXPECT_THAT(r.status().message(), HasSubstr(range));
}

TEST(InvalidSpecTest, NamesTheFieldAndTheRange) {
  TaskSpec t = SmallTask();
  t.dataset.m = 0;
  ExpectInvalid(t, "dataset.m", "1..64");
  t.dataset.m = 65;
  ExpectInvalid(t, "dataset.m", "1..64");
  t = SmallTask();
  t.dataset.seq_len = 0;
  ExpectInvalid(t, "dataset.seq_len", "1..64");
  t = SmallTask();
  t.rank = 0;
  ExpectInvalid(t, "rank", "1..");
  t = SmallTask();
  t.dataset.m = 7;  // 7 * 3 = 21 > 18
  ExpectInvalid(t, "dataset.m * dataset.seq_len", "1..18");
  t = SmallTask();
  t.dataset.kind = DatasetKind::kPool;
  t.dataset.m = 5;
  t.dataset.weight = 2;
  t.dataset.pool_size = 11;  // C(5,2) = 10
  t.dataset.train_size = 10;
  ExpectInvalid(t, "dataset.pool_size", "2..10");
  t = SmallTask();
  t.head.kind = static_cast<HeadKind>(42);
  ExpectInvalid(t, "head.kind", "kernel, softmax, signed_kernel, multihead_kernel");
  t = SmallTask();
  t.head.feature_map = static_cast<FeatureMap>(42);
  ExpectInvalid(t, "head.feature_map", "elu1");
}

TEST(InvalidSpecTest, UnknownNamesInJson) {
  auto head = TaskSpecFromJson(R"({"head": {"kind": "linformer"}})");
  EXPECT_EQ(head.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(head.status().message(), HasSubstr("kind"));
  auto map = TaskSpecFromJson(R"({"head": {"feature_map": "cosine"}})");
  EXPECT_EQ(map.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(map.status().message(), HasSubstr("feature_map"));
}

// Fused seeds equal single-seed runs: same init, same minibatch order, and a
// per-seed gradient. Tolerance: 1e-5 relative on the final loss (vectorized
// and scalar float paths may round differently), exact on everything counted.
TEST(FusedTest, EachSeedEqualsItsSingleSeedRun) {
  for (HeadKind kind : {HeadKind::kKernel, HeadKind::kSoftmax}) {
    TaskSpec t = SmallTask();
    t.head.kind = kind;
    t.train.batch_size = 64;
    t.train.early_stop_evals = 2;
    auto fused = RunTask(t, kCpu);
    ASSERT_TRUE(fused.ok()) << fused.status();
    for (size_t i = 0; i < t.seeds.size(); ++i) {
      TaskSpec one = t;
      one.seeds = {t.seeds[i]};
      auto single = RunTask(one, kCpu);
      ASSERT_TRUE(single.ok()) << single.status();
      const SeedResult& a = fused->seeds[i];
      const SeedResult& b = single->seeds[0];
      EXPECT_EQ(a.seed, b.seed);
      EXPECT_NEAR(a.final_loss, b.final_loss, 1e-5 * std::max(1.0, b.final_loss));
      EXPECT_EQ(a.steps, b.steps);
      EXPECT_EQ(a.train.position_accuracy, b.train.position_accuracy);
      EXPECT_EQ(a.train.exact_accuracy, b.train.exact_accuracy);
      EXPECT_NEAR(a.train.max_abs_error, b.train.max_abs_error, 1e-4);
    }
    // The seeds really differ from one another.
    EXPECT_NE(fused->seeds[0].final_loss, fused->seeds[1].final_loss);
  }
}

TEST(FusedTest, DeterministicOnCpu) {
  TaskSpec t = SmallTask();
  t.train.batch_size = 100;
  auto a = RunTask(t, kCpu);
  auto b = RunTask(t, kCpu);
  ASSERT_TRUE(a.ok() && b.ok());
  for (size_t i = 0; i < t.seeds.size(); ++i) {
    EXPECT_EQ(a->seeds[i].final_loss, b->seeds[i].final_loss);
    EXPECT_EQ(a->seeds[i].train.max_abs_error, b->seeds[i].train.max_abs_error);
    EXPECT_EQ(a->seeds[i].train.position_accuracy, b->seeds[i].train.position_accuracy);
    EXPECT_EQ(a->seeds[i].steps, b->seeds[i].steps);
  }
}

TEST(FusedTest, OtherHeadsAndLossesRun) {
  for (HeadKind kind : {HeadKind::kSignedKernel, HeadKind::kMultiheadKernel}) {
    for (LossKind loss : {LossKind::kMse, LossKind::kCrossEntropy}) {
      TaskSpec t = SmallTask();
      t.head.kind = kind;
      t.head.num_heads = 3;
      t.head.hidden = {8};
      t.train.loss = loss;
      t.train.max_steps = 40;
      auto r = RunTask(t, kCpu);
      ASSERT_TRUE(r.ok()) << r.status();
      for (const SeedResult& s : r->seeds) {
        EXPECT_TRUE(std::isfinite(s.final_loss));
        EXPECT_EQ(s.steps, 40);
        EXPECT_EQ(s.device, "cpu");
        EXPECT_EQ(s.train.sequences, 512);
        EXPECT_EQ(s.facts.train_sequences, 512);
      }
    }
  }
}

// The flag is read after every step, not only at evaluations: a stop
// asked for before the first evaluation ends the run at the step it sees it.
TEST(FusedTest, CancelStopsTheRunAtTheNextStep) {
  TaskSpec t = SmallTask();
  ASSERT_GT(t.train.eval_every, 3);
  RunOptions opts = kCpu;
  int64_t seen = 0;
  int polls = 0;
  opts.on_progress = [&seen](int64_t steps) { seen = steps; };
  opts.should_stop = [&polls] { return ++polls == 3; };
  auto r = RunTask(t, opts);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(r.status().message(), "stopped after 3 steps");
  EXPECT_EQ(seen, 0);  // no evaluation ran
  EXPECT_EQ(polls, 3);
}

// The phase transition on one witness family: m = 24, weight-8 code with
// overlap <= 4, the first 12 codewords (276 sequences, every position
// scored), a smaller member of the family the full run uses so that it
// trains in seconds.
TaskSpec WitnessTask(HeadKind kind, int rank) {
  TaskSpec t;
  t.dataset.kind = DatasetKind::kWitness;
  t.dataset.m = 24;
  t.dataset.seq_len = 3;
  t.dataset.num_queries = 12;
  t.head.kind = kind;
  t.rank = rank;
  t.train.lr = 0.01;
  t.train.max_steps = 1500;
  t.train.eval_every = 50;
  t.train.early_stop_evals = 1;
  t.seeds = {0, 1, 2};
  return t;
}

TEST(PhaseTransitionTest, Rank1KernelFails) {
  TaskSpec t = WitnessTask(HeadKind::kKernel, 1);
  t.train.max_steps = 600;
  auto r = RunTask(t, kCpu);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->facts.train_sequences, 276);
  EXPECT_EQ(r->facts.rank_lower_bound, 6);
  // Rank 1 cannot solve this family (its normalized weights do not depend
  // on the query), so no seed is exact whatever its trajectory; how far it
  // stays from exact is a trajectory, so the margin is on the median.
  for (const SeedResult& s : r->seeds) EXPECT_GT(s.train.error, 0.0) << "seed " << s.seed;
  EXPECT_GE(MedianTrainError(*r), 0.4);
}

// Every seed of 0..2 reaches zero error on the machines this was written
// on; the claim is two of three.
TEST(PhaseTransitionTest, Rank64KernelIsExact) {
  auto r = RunTask(WitnessTask(HeadKind::kKernel, 64), kCpu);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->seeds.size(), 3u);
  EXPECT_GE(ExactSeeds(*r), 2);
}

// first_exact_step is the first evaluated step at which train exact
// accuracy was 1. With early_stop_evals = 1 a seed stops at that very
// evaluation, so it equals the seed's steps and is a multiple of eval_every;
// a seed never exact has none.
TEST(FirstExactStepTest, TheEvaluatedStepOfTheFirstExactEvaluationOrNone) {
  auto exact = RunTask(WitnessTask(HeadKind::kKernel, 64), kCpu);
  ASSERT_TRUE(exact.ok()) << exact.status();
  ASSERT_GE(ExactSeeds(*exact), 2);
  for (const SeedResult& s : exact->seeds) {
    // A seed that is not exact at the end was never exact on an
    // evaluation (it would have stopped there).
    if (s.train.error != 0.0) {
      EXPECT_FALSE(GetMetric("first_exact_step", s).has_value()) << "seed " << s.seed;
      continue;
    }
    ASSERT_TRUE(GetMetric("first_exact_step", s).has_value()) << "seed " << s.seed;
    const auto first_exact = static_cast<int64_t>(*GetMetric("first_exact_step", s));
    EXPECT_EQ(first_exact, s.steps) << "seed " << s.seed;
    EXPECT_EQ(first_exact % 50, 0) << "seed " << s.seed;
    EXPECT_GT(first_exact, 0) << "seed " << s.seed;
  }
  TaskSpec t = WitnessTask(HeadKind::kKernel, 1);
  t.train.max_steps = 100;
  auto never = RunTask(t, kCpu);
  ASSERT_TRUE(never.ok()) << never.status();
  for (const SeedResult& s : never->seeds) {
    ASSERT_GT(s.train.error, 0.0) << "seed " << s.seed;
    EXPECT_FALSE(GetMetric("first_exact_step", s).has_value()) << "seed " << s.seed;
    EXPECT_EQ(s.steps, 100) << "seed " << s.seed;
  }
}

// Each seed's curve: a point per evaluation it took part in (every
// eval_every steps until it stopped, and the last step), the last one the
// result's final metrics, the test split measured when the dataset has one.
void ExpectCurvesEndAtTheFinalMetrics(const TaskResult& r, int eval_every, bool has_test) {
  for (const SeedResult& s : r.seeds) {
    SCOPED_TRACE(testing::Message() << "seed " << s.seed);
    EXPECT_EQ(s.curve.has_test, has_test);
    ASSERT_FALSE(s.curve.points.empty());
    for (size_t i = 0; i < s.curve.points.size(); ++i) {
      const int64_t want = std::min<int64_t>((i + 1) * eval_every, s.steps);
      EXPECT_EQ(s.curve.points[i].step, want) << "point " << i;
    }
    const CurvePoint& last = s.curve.points.back();
    EXPECT_EQ(last.step, s.steps);
    EXPECT_FLOAT_EQ(last.train_error, static_cast<float>(s.train.error));
    EXPECT_FLOAT_EQ(last.train_position_accuracy, static_cast<float>(s.train.position_accuracy));
    EXPECT_FLOAT_EQ(last.loss, static_cast<float>(s.final_loss));
    if (has_test) {
      EXPECT_FLOAT_EQ(last.test_error, static_cast<float>(s.test.error));
      EXPECT_FLOAT_EQ(last.test_position_accuracy,
                      static_cast<float>(s.test.position_accuracy));
    }
    EXPECT_TRUE(CheckCurve(s.curve, s.steps, eval_every, has_test).ok());
  }
}

TEST(LearningCurveTest, OnePointPerEvaluationEndingAtTheFinalMetrics) {
  TaskSpec t = SmallTask();  // 120 steps, an evaluation every 20
  auto r = RunTask(t, kCpu);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectCurvesEndAtTheFinalMetrics(*r, 20, false);

  // A pool dataset: the test split at every evaluation too. 130 steps at
  // eval_every 50: points at 50, 100 and the last step, 130.
  TaskSpec pool = SmallTask();
  pool.dataset.kind = DatasetKind::kPool;
  pool.dataset.m = 6;
  pool.dataset.pool_size = 40;
  pool.dataset.train_size = 64;
  pool.dataset.test_size = 32;
  pool.train.max_steps = 130;
  pool.train.eval_every = 50;
  pool.train.early_stop_evals = 0;
  auto p = RunTask(pool, kCpu);
  ASSERT_TRUE(p.ok()) << p.status();
  ExpectCurvesEndAtTheFinalMetrics(*p, 50, true);
  for (const SeedResult& s : p->seeds) {
    ASSERT_EQ(s.curve.points.size(), 3u);
    EXPECT_EQ(s.curve.points[2].step, 130);
  }

  // The loss over the test split after the last step: a mean of squared
  // readout errors (MSE), so at most the largest one squared, and not the
  // train split's.
  for (const SeedResult& s : p->seeds) {
    SCOPED_TRACE(testing::Message() << "seed " << s.seed);
    ASSERT_EQ(pool.train.loss, LossKind::kMse);
    const std::optional<double> test_loss = GetMetric("final_test_loss", s);
    ASSERT_TRUE(test_loss.has_value());
    EXPECT_GT(*test_loss, 0.0);
    EXPECT_LE(*test_loss, s.test.max_abs_error * s.test.max_abs_error * (1 + 1e-5));
    EXPECT_NE(*test_loss, s.final_loss);
  }
  // Without a test split, it is missing.
  for (const SeedResult& s : r->seeds) EXPECT_FALSE(GetMetric("final_test_loss", s).has_value());

  // A head trained for no step has no curve.
  TaskSpec none = SmallTask();
  none.train.max_steps = 0;
  auto n = RunTask(none, kCpu);
  ASSERT_TRUE(n.ok()) << n.status();
  for (const SeedResult& s : n->seeds) EXPECT_TRUE(s.curve.points.empty());
}

// Dense softmax is exact on every seed (the paper's claim 3). With the hot
// start (inv_tau = 0.1, heads.h) seeds 0..9 all reach zero error on this
// family by step 300 at lr 0.01; with inv_tau = 1 seeds 1 and 2 stayed at
// error 0.417 (docs/TRAINER.md, "Softmax training").
// The claims are stated over six seeds, none about one seed's trajectory:
// five exact, with a margin of one, and four of them exact within twice the
// steps every seed needed where this was written.
TEST(PhaseTransitionTest, SoftmaxIsExactOnEverySeed) {
  TaskSpec t = WitnessTask(HeadKind::kSoftmax, 0);
  t.seeds = {0, 1, 2, 3, 4, 5};
  auto r = RunTask(t, kCpu);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->seeds.size(), 6u);
  EXPECT_GE(ExactSeeds(*r), 5);
  int exact_by_600 = 0;
  for (const SeedResult& s : r->seeds) {
    if (s.train.error == 0.0 && s.steps <= 600) ++exact_by_600;
  }
  EXPECT_GE(exact_by_600, 4);
}

// The schedule reaches the optimizer: a cosine over one step gives that step
// lr 0 (LearningRateAt), so the weights, and the final loss, are exactly
// the initial ones; a warm-up over the one step gives it lr * 1/1, exactly
// the constant schedule's step.
TEST(ScheduleTest, OneStepRunsFollowTheScheduleExactly) {
  TaskSpec t = SmallTask();
  t.train.max_steps = 0;
  auto initial = RunTask(t, kCpu);
  ASSERT_TRUE(initial.ok()) << initial.status();
  t.train.max_steps = 1;
  t.train.eval_every = 1;
  auto constant = RunTask(t, kCpu);
  ASSERT_TRUE(constant.ok()) << constant.status();
  t.train.warmup_steps = 1;
  auto warmup = RunTask(t, kCpu);
  ASSERT_TRUE(warmup.ok()) << warmup.status();
  t.train.warmup_steps = 0;
  t.train.schedule = LrSchedule::kCosine;
  auto cosine = RunTask(t, kCpu);
  ASSERT_TRUE(cosine.ok()) << cosine.status();
  for (size_t i = 0; i < t.seeds.size(); ++i) {
    EXPECT_EQ(cosine->seeds[i].final_loss, initial->seeds[i].final_loss) << i;
    EXPECT_EQ(cosine->seeds[i].steps, 1) << i;
    EXPECT_NE(constant->seeds[i].final_loss, initial->seeds[i].final_loss) << i;
    EXPECT_EQ(warmup->seeds[i].final_loss, constant->seeds[i].final_loss) << i;
  }
}

// A warm-up and a cosine decay change a longer run (the lr differs on every
// step), and each seed still equals its single-seed run under the schedule.
TEST(ScheduleTest, ScheduledRunsDifferFromConstantAndFuseLikeIt) {
  TaskSpec t = SmallTask();
  auto constant = RunTask(t, kCpu);
  ASSERT_TRUE(constant.ok()) << constant.status();
  t.train.schedule = LrSchedule::kCosine;
  t.train.warmup_steps = 20;
  auto scheduled = RunTask(t, kCpu);
  ASSERT_TRUE(scheduled.ok()) << scheduled.status();
  for (size_t i = 0; i < t.seeds.size(); ++i) {
    EXPECT_NE(scheduled->seeds[i].final_loss, constant->seeds[i].final_loss) << i;
    TaskSpec one = t;
    one.seeds = {t.seeds[i]};
    auto single = RunTask(one, kCpu);
    ASSERT_TRUE(single.ok()) << single.status();
    EXPECT_NEAR(single->seeds[0].final_loss, scheduled->seeds[i].final_loss,
                1e-5 * std::max(1.0, single->seeds[0].final_loss));
    EXPECT_EQ(single->seeds[0].steps, scheduled->seeds[i].steps);
  }
}

// The signed kernel trains where a signed solution is known. On every
// sequence of ({0,1}^3)^3 the indicator construction (docs/SCIENCE.md,
// "Exact constructions") is exact with 2^3 = 8 features; its scores are
// nonnegative, where the signed quotient is 1 / ((1 + eps^2) den), so the
// same features with the readout scaled by 1 + eps^2 are an exact signed
// head of rank 8. Trained from random signed features it reaches zero error
// on 9 of seeds 0-9 at these settings on one machine, while another CPU
// ends seed 2 at 0.0176: which seeds get there depends on the machine, so
// the claim is at least 3 of seeds 0-5 (docs/TRAINER.md, "Signed kernels").
// With the earlier quotient den / (den^2 + 1e-6) 1 of seeds 0-4 did at lr
// 0.01 over 3,000 steps and none at lr 0.02.
TEST(SignedKernelTest, TrainsToZeroErrorWhereASignedSolutionIsKnown) {
  TaskSpec t = SmallTask();
  t.head.kind = HeadKind::kSignedKernel;
  t.rank = 8;
  t.train.lr = 0.01;
  t.train.schedule = LrSchedule::kCosine;
  t.train.max_steps = 2000;
  t.train.eval_every = 50;
  t.seeds = {0, 1, 2, 3, 4, 5};
  auto r = RunTask(t, kCpu);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->seeds.size(), 6u);
  EXPECT_GE(ExactSeeds(*r), 3);
  for (const SeedResult& s : r->seeds) {
    EXPECT_TRUE(std::isfinite(s.final_loss)) << "seed " << s.seed;
  }
}

// A grid sweep of SmallTask's dataset and training: one kernel head at `ranks`.
SweepSpec SmallKernelSweep(const std::vector<int>& ranks, int seed_count) {
  SweepSpec sweep;
  sweep.name = "small";
  sweep.dataset = SmallTask().dataset;
  sweep.train = SmallTask().train;
  HeadSpec kernel;
  kernel.kind = HeadKind::kKernel;
  sweep.heads = {kernel};
  sweep.ranks = ranks;
  sweep.seed_count = seed_count;
  return sweep;
}

TEST(RunSweepTest, TrainsEveryTaskOfTheGridInSpecOrderAsRunTaskWould) {
  SweepSpec sweep = SmallKernelSweep({4, 1}, 3);  // ranks in spec order, not sorted
  HeadSpec softmax;
  softmax.kind = HeadKind::kSoftmax;
  sweep.heads.push_back(softmax);
  std::vector<SweepTaskReport> reports;
  const absl::Status run =
      RunSweep(sweep, {.max_seeds = 2}, kCpu,
               [&](const SweepTaskReport& r) { reports.push_back(r); });
  ASSERT_TRUE(run.ok()) << run;
  // kernel r=4 seeds {0,1} and {2}, kernel r=1 likewise, softmax likewise.
  ASSERT_EQ(reports.size(), 6u);
  const std::vector<std::tuple<std::string, int, size_t>> want = {
      {"kernel/elu1", 4, 2}, {"kernel/elu1", 4, 1}, {"kernel/elu1", 1, 2},
      {"kernel/elu1", 1, 1}, {"softmax", 0, 2},     {"softmax", 0, 1}};
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(reports[i].index, static_cast<int>(i));
    EXPECT_EQ(reports[i].head, std::get<0>(want[i]));
    EXPECT_EQ(reports[i].rank, std::get<1>(want[i]));
    EXPECT_EQ(reports[i].result.seeds.size(), std::get<2>(want[i]));
    EXPECT_GT(reports[i].seconds, 0);
  }
  // The first task is exactly RunTask of the cell's task spec.
  auto direct = RunTask(MakeTaskSpec(sweep, 0, 4, {0, 1}), kCpu);
  ASSERT_TRUE(direct.ok()) << direct.status();
  for (size_t s = 0; s < 2; ++s) {
    EXPECT_EQ(reports[0].result.seeds[s].seed, direct->seeds[s].seed);
    EXPECT_EQ(reports[0].result.seeds[s].final_loss, direct->seeds[s].final_loss);
  }

  sweep.mode = SweepMode::kSearch;
  absl::Status search = RunSweep(sweep, {.max_seeds = 2}, kCpu, nullptr);
  EXPECT_EQ(search.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(search.message(), HasSubstr("mode"));
  sweep.mode = SweepMode::kGrid;
  absl::Status seeds = RunSweep(sweep, {.max_seeds = 0}, kCpu, nullptr);
  EXPECT_EQ(seeds.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(seeds.message(), "max_seeds: 0 is out of range 1..1024");
  for (int slots : {0, 65}) {
    absl::Status s = RunSweep(sweep, {.max_seeds = 2, .slots = slots}, kCpu, nullptr);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message(), absl::StrCat("slots: ", slots, " is out of range 1..64"));
  }
}

// Slots change when tasks run, not what they compute: every task once, each
// result exactly the one-slot run's.
TEST(RunSweepTest, SlotsTrainEveryTaskOnceWithTheOneSlotResults) {
  const SweepSpec sweep = SmallKernelSweep({1, 2, 4, 8, 16}, 2);
  std::map<int, SweepTaskReport> one, three;
  ASSERT_TRUE(RunSweep(sweep, {.max_seeds = 1}, kCpu, [&](const SweepTaskReport& r) {
                one.emplace(r.index, r);
              }).ok());
  // Each of the first tasks waits at its first evaluation until three are
  // under way: only three slots running at once get past it without the
  // timeout.
  RunOptions run = kCpu;
  std::mutex mu;
  std::condition_variable cv;
  int started = 0;
  bool timed_out = false;
  run.on_progress = [&](int64_t) {
    std::unique_lock<std::mutex> lock(mu);
    if (started >= 3) return;
    ++started;
    cv.notify_all();
    if (!cv.wait_for(lock, std::chrono::seconds(20), [&] { return started >= 3; })) {
      timed_out = true;
    }
  };
  int calls = 0;
  ASSERT_TRUE(RunSweep(sweep, {.max_seeds = 1, .slots = 3}, run,
                       [&](const SweepTaskReport& r) {
                         ++calls;
                         three.emplace(r.index, r);
                       })
                  .ok());
  EXPECT_FALSE(timed_out);
  EXPECT_EQ(calls, 10);
  ASSERT_EQ(one.size(), 10u);
  ASSERT_EQ(three.size(), 10u);
  for (const auto& [index, r] : one) {
    const SweepTaskReport& t = three.at(index);
    EXPECT_EQ(t.rank, r.rank) << index;
    EXPECT_EQ(t.rank, sweep.ranks[static_cast<size_t>(index / 2)]) << index;
    ASSERT_EQ(t.result.seeds.size(), 1u) << index;
    EXPECT_EQ(t.result.seeds[0].seed, static_cast<uint64_t>(index % 2)) << index;
    EXPECT_EQ(t.result.seeds[0].final_loss, r.result.seeds[0].final_loss) << index;
    EXPECT_EQ(t.result.seeds[0].steps, r.result.seeds[0].steps) << index;
  }
}

// The first failure ends the run: the caller's stop request here, so every
// slot's task is cancelled, nothing is reported, and the error comes back.
TEST(RunSweepTest, AFailedTaskStopsTheOtherSlots) {
  const SweepSpec sweep = SmallKernelSweep({1, 2, 4, 8}, 1);
  RunOptions stop = kCpu;
  std::atomic<int> polls{0};
  stop.should_stop = [&polls] {
    ++polls;
    return true;
  };
  int reports = 0;
  const absl::Status s = RunSweep(sweep, {.max_seeds = 1, .slots = 2}, stop,
                                  [&](const SweepTaskReport&) { ++reports; });
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(reports, 0);
  // At most one task per slot ran (the second slot may find the failure
  // before it takes a task): none started after the first failure.
  EXPECT_GE(polls.load(), 1);
  EXPECT_LE(polls.load(), 2);
}

TEST(DeviceTest, ResolvesNames) {
  auto cpu = ResolveDeviceName("cpu");
  ASSERT_TRUE(cpu.ok());
  EXPECT_EQ(*cpu, "cpu");
  EXPECT_TRUE(ResolveDeviceName("auto").ok());
  EXPECT_EQ(ResolveDeviceName("tpu").status().code(), absl::StatusCode::kInvalidArgument);
  const BuildInfo info = GetBuildInfo();
  EXPECT_FALSE(info.torch_version.empty());
  if (info.cuda_version.empty()) {
    EXPECT_EQ(ResolveDeviceName("cuda").status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(DeviceMemoryBytes("cuda").status().code(), absl::StatusCode::kFailedPrecondition);
  }
  auto cpu_memory = DeviceMemoryBytes("cpu");
  ASSERT_TRUE(cpu_memory.ok());
  EXPECT_EQ(*cpu_memory, 0);
  EXPECT_EQ(DeviceMemoryBytes("tpu").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ranksweep::trainer
