// Datasets: targets, sizes, determinism, the witness code and bound, pool
// disjointness, and the dataset-dependent InvalidArgument checks.
#include "worker/trainer/dataset.h"

#include <set>
#include <tuple>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ranksweep::trainer {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

uint64_t Bits(const std::string& s) {  // "1010" -> bit 0 = s[0]
  uint64_t v = 0;
  for (size_t k = 0; k < s.size(); ++k) v |= static_cast<uint64_t>(s[k] == '1') << k;
  return v;
}

std::vector<int32_t> Targets(const std::vector<uint64_t>& seq) {
  std::vector<int32_t> t(seq.size());
  MinIpTargets(seq.data(), static_cast<int>(seq.size()), t.data());
  return t;
}

TEST(MinIpTargetsTest, HandWrittenCases) {
  // N = 1: t = |x|.
  EXPECT_THAT(Targets({Bits("1101")}), ElementsAre(3));
  // N = 2: t = <x1, x2> at both positions.
  EXPECT_THAT(Targets({Bits("1100"), Bits("0110")}), ElementsAre(1, 1));
  // N = 3: x1 meets x2 in 2, x3 in 0; x2 meets x3 in 1.
  EXPECT_THAT(Targets({Bits("1110"), Bits("0111"), Bits("0001")}), ElementsAre(0, 1, 0));
  // The zero token forces 0 everywhere.
  EXPECT_THAT(Targets({Bits("1111"), Bits("0000"), Bits("1111")}), ElementsAre(0, 0, 0));
  // Repeated tokens: min over the others and itself.
  EXPECT_THAT(Targets({Bits("11"), Bits("11"), Bits("01")}), ElementsAre(1, 1, 1));
}

DatasetSpec Exhaustive(int m, int n) {
  DatasetSpec d;
  d.kind = DatasetKind::kExhaustive;
  d.m = m;
  d.seq_len = n;
  return d;
}

TEST(ExhaustiveTest, SizeAndFacts) {
  auto d = BuildDataset(Exhaustive(3, 3));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->train.size, 512);
  EXPECT_EQ(d->test.size, 0);
  EXPECT_EQ(d->facts.train_sequences, 512);
  EXPECT_EQ(d->facts.test_sequences, 0);
  EXPECT_EQ(d->facts.distinct_queries, 8);
  EXPECT_EQ(d->facts.rank_lower_bound, 0);
  // Every sequence appears once.
  std::set<std::vector<uint64_t>> seen;
  for (int64_t s = 0; s < d->train.size; ++s) {
    seen.insert({d->train.tokens.begin() + 3 * s, d->train.tokens.begin() + 3 * s + 3});
  }
  EXPECT_EQ(seen.size(), 512u);
}

TEST(ExhaustiveTest, RejectsTooManyBits) {
  auto d = BuildDataset(Exhaustive(7, 3));
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(d.status().message(), HasSubstr("dataset.m * dataset.seq_len"));
  EXPECT_THAT(d.status().message(), HasSubstr("18"));
}

TEST(WitnessCodeTest, GreedyWeight8CodeIsTheGolayOctads) {
  auto code = GreedyConstantWeightCode(24, 8, 4);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(code->size(), 759u);
  // Octads meet in 0, 2 or 4 points, and every 5-set lies in exactly one
  // octad (S(5,8,24)); check the intersection sizes and the 5-set count.
  std::set<int> overlaps;
  for (size_t i = 0; i < code->size(); ++i) {
    EXPECT_EQ(__builtin_popcountll((*code)[i]), 8);
    for (size_t j = i + 1; j < code->size(); ++j) {
      overlaps.insert(InnerProduct((*code)[i], (*code)[j]));
    }
  }
  EXPECT_EQ(overlaps, (std::set<int>{0, 2, 4}));
  EXPECT_EQ(code->size() * 56u, 42504u);  // C(8,5) * 759 == C(24,5)
}

DatasetSpec Witness(int n) {
  DatasetSpec d;
  d.kind = DatasetKind::kWitness;
  d.m = 24;
  d.seq_len = 3;
  d.code_weight = 8;
  d.max_overlap = 4;
  d.num_queries = n;
  return d;
}

TEST(WitnessTest, FactsAndStructure) {
  auto d = BuildDataset(Witness(24));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->train.size, 24 * 47);  // n (2n - 1)
  EXPECT_EQ(d->test.size, 0);
  // Every position is scored by default: 24 queries + 24 keys.
  EXPECT_EQ(d->facts.distinct_queries, 48);
  EXPECT_EQ(d->facts.rank_upper_bound, 48);
  double bound = 0;
  auto code = GreedyConstantWeightCode(24, 8, 4, 24);
  ASSERT_TRUE(code.ok());
  EXPECT_EQ(d->facts.rank_lower_bound, WitnessRankLowerBound(*code, 8, &bound));
  EXPECT_GT(d->facts.rank_lower_bound, bound);
  EXPECT_LE(d->facts.rank_lower_bound, bound + 1);
  // Query last; the own-key probe targets 0; keys complement codewords.
  for (int64_t s = 0; s < d->train.size; ++s) {
    const uint64_t q = d->train.tokens[3 * s + 2];
    EXPECT_EQ(__builtin_popcountll(q), 8);
    EXPECT_EQ(__builtin_popcountll(d->train.tokens[3 * s]), 16);
    EXPECT_EQ(__builtin_popcountll(d->train.tokens[3 * s + 1]), 16);
  }
  DatasetSpec final_only = Witness(24);
  final_only.final_query_only = true;
  auto f = BuildDataset(final_only);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->facts.distinct_queries, 24);
  EXPECT_EQ(f->facts.rank_upper_bound, 24);
}

// The witness preset's family (examples/presets/witness.yaml): n = 26 is
// the fewest queries whose octad family certifies the paper's bound of 8
// (q = 7.025; n = 25 gives q = 6.956, bound 7), with 26 * 51 = 1,326 inputs.
TEST(WitnessTest, TwentySixQueriesAreTheFewestForBoundEight) {
  // n, n (2n - 1) inputs, the certificate q (the bound is floor(q) + 1).
  for (auto [n, size, q] : {std::tuple{25, 1225, 6.956}, std::tuple{26, 1326, 7.025}}) {
    auto d = BuildDataset(Witness(n));
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_EQ(d->train.size, size);
    EXPECT_EQ(d->facts.rank_lower_bound, n == 26 ? 8 : 7) << n;
    double bound = 0;
    auto code = GreedyConstantWeightCode(24, 8, 4, n);
    ASSERT_TRUE(code.ok());
    WitnessRankLowerBound(*code, 8, &bound);
    EXPECT_NEAR(bound, q, 5e-4) << n;
  }
}

TEST(WitnessTest, BoundFormula) {
  // Two disjoint weight-4 words: gap 4, eps = 1/3, bound 4 / (2 + 2/9).
  double bound = 0;
  EXPECT_EQ(WitnessRankLowerBound({Bits("11110000"), Bits("00001111")}, 4, &bound), 2);
  EXPECT_DOUBLE_EQ(bound, 4.0 / (2.0 + 2.0 / 9.0));
}

TEST(WitnessTest, RejectsTooManyQueriesAndSmallGaps) {
  auto d = BuildDataset(Witness(760));
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(d.status().message(), HasSubstr("dataset.num_queries must be in 0..759"));
  DatasetSpec gap1 = Witness(8);
  gap1.max_overlap = 7;
  d = BuildDataset(gap1);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(d.status().message(), HasSubstr("dataset.max_overlap must be in 0..6"));
  DatasetSpec len4 = Witness(8);
  len4.seq_len = 4;
  d = BuildDataset(len4);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(d.status().message(), HasSubstr("dataset.seq_len"));
}

DatasetSpec Pool() {
  DatasetSpec d;
  d.kind = DatasetKind::kPool;
  d.m = 12;
  d.seq_len = 3;
  d.weight = 4;
  d.pool_size = 200;
  d.test_pool_share = 0.25;
  d.train_size = 2000;
  d.test_size = 500;
  d.hard_share = 0.5;
  d.data_seed = 7;
  return d;
}

TEST(PoolTest, NoTestVectorInAnyTrainingSequence) {
  auto d = BuildDataset(Pool());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->train.size, 2000);
  EXPECT_EQ(d->test.size, 500);
  const std::set<uint64_t> train(d->train.tokens.begin(), d->train.tokens.end());
  const std::set<uint64_t> test(d->test.tokens.begin(), d->test.tokens.end());
  for (uint64_t v : test) EXPECT_EQ(train.count(v), 0u) << v;
  EXPECT_LE(train.size(), 150u);
  EXPECT_LE(test.size(), 50u);
  for (uint64_t v : train) EXPECT_EQ(__builtin_popcountll(v), 4);
  // Half are hard triples: the two candidates' overlaps are one apart.
  int hard = 0;
  for (int64_t s = 0; s < d->train.size; ++s) {
    const uint64_t* q = &d->train.tokens[3 * s];
    hard += std::abs(InnerProduct(q[2], q[0]) - InnerProduct(q[2], q[1])) == 1;
  }
  EXPECT_GE(hard, 1000);
}

TEST(PoolTest, BernoulliAndDeterminism) {
  DatasetSpec spec = Pool();
  spec.weight = 0;
  spec.bernoulli_p = 0.3;
  auto a = BuildDataset(spec);
  auto b = BuildDataset(spec);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->train.tokens, b->train.tokens);
  EXPECT_EQ(a->test.tokens, b->test.tokens);
  spec.data_seed = 8;
  auto c = BuildDataset(spec);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(a->train.tokens, c->train.tokens);
}

TEST(PoolTest, RejectsPoolLargerThanUniverse) {
  DatasetSpec spec = Pool();
  spec.m = 6;
  spec.weight = 3;
  spec.pool_size = 21;  // C(6,3) = 20
  auto d = BuildDataset(spec);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(d.status().message(),
              HasSubstr("dataset.pool_size must be 0 (every vector) or in 2..20"));
  spec.pool_size = 20;
  spec.test_pool_share = 0.0;
  d = BuildDataset(spec);  // test_size > 0 but the test pool is empty
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(d.status().message(), HasSubstr("dataset.test_pool_share"));
}


// A split's sequences as tuples, in order.
std::vector<std::vector<uint64_t>> Sequences(const Split& split, int n) {
  std::vector<std::vector<uint64_t>> out;
  for (int64_t s = 0; s < split.size; ++s) {
    out.emplace_back(split.tokens.begin() + s * n, split.tokens.begin() + (s + 1) * n);
  }
  return out;
}

int HardTriples(const Split& split) {
  int hard = 0;
  for (int64_t s = 0; s < split.size; ++s) {
    const uint64_t* q = &split.tokens[3 * s];
    hard += std::abs(InnerProduct(q[2], q[0]) - InnerProduct(q[2], q[1])) == 1;
  }
  return hard;
}

// m = 8, every weight-3 vector (C(8,3) = 56): 56^3 = 175,616 sequences, so
// split sequences enumerates them.
DatasetSpec EveryWeight3Vector(PoolSplit split) {
  DatasetSpec d = Pool();
  d.m = 8;
  d.weight = 3;
  d.pool_size = 0;
  d.test_pool_share = 0.5;
  d.split = split;
  return d;
}

// Under either split no test sequence equals a training sequence; under
// tokens no test vector is in training, under sequences the test vectors
// are training vectors; and the dataset is the same on every build.
TEST(PoolSplitTest, NoTestSequenceInTrainingTokensDisjointOrShared) {
  for (PoolSplit split : {PoolSplit::kTokens, PoolSplit::kSequences}) {
    SCOPED_TRACE(Name(split));
    const DatasetSpec spec = EveryWeight3Vector(split);
    auto d = BuildDataset(spec);
    ASSERT_TRUE(d.ok()) << d.status();
    ASSERT_EQ(d->train.size, 2000);
    ASSERT_EQ(d->test.size, 500);
    EXPECT_EQ(d->facts.train_sequences, 2000);
    EXPECT_EQ(d->facts.test_sequences, 500);
    const auto train = Sequences(d->train, 3);
    const std::set<std::vector<uint64_t>> train_set(train.begin(), train.end());
    for (const auto& seq : Sequences(d->test, 3)) EXPECT_EQ(train_set.count(seq), 0u);
    const std::set<uint64_t> train_tokens(d->train.tokens.begin(), d->train.tokens.end());
    const std::set<uint64_t> test_tokens(d->test.tokens.begin(), d->test.tokens.end());
    int shared = 0;
    for (uint64_t v : test_tokens) shared += train_tokens.count(v) > 0;
    if (split == PoolSplit::kTokens) {
      EXPECT_EQ(shared, 0);
      EXPECT_EQ(train_tokens.size() + test_tokens.size(), 56u);  // 28 + 28, all used
    } else {
      EXPECT_EQ(static_cast<size_t>(shared), test_tokens.size());
      EXPECT_EQ(train_tokens.size(), 56u);
      // Enumerated: drawn without replacement, so no sequence repeats.
      EXPECT_EQ(train_set.size(), 2000u);
    }
    for (uint64_t v : train_tokens) EXPECT_EQ(__builtin_popcountll(v), 3);
    EXPECT_GE(HardTriples(d->train), 1000);
    EXPECT_GE(HardTriples(d->test), 250);
    auto again = BuildDataset(spec);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->train.tokens, d->train.tokens);
    EXPECT_EQ(again->test.tokens, d->test.tokens);
    DatasetSpec other = spec;
    other.data_seed = 8;
    auto c = BuildDataset(other);
    ASSERT_TRUE(c.ok());
    EXPECT_NE(c->train.tokens, d->train.tokens);
  }
}

// Every token of {0,1}^3 (pool_size 0, weight 0) and every one of the
// 8^3 = 512 sequences once: 256 train and 256 test partition them.
TEST(PoolSplitTest, EveryTokenAndEverySequenceOnceWhenTheSplitsTakeThemAll) {
  DatasetSpec spec = Pool();
  spec.m = 3;
  spec.weight = 0;
  spec.pool_size = 0;
  spec.split = PoolSplit::kSequences;
  spec.train_size = 256;
  spec.test_size = 256;
  spec.hard_share = 0;
  auto d = BuildDataset(spec);
  ASSERT_TRUE(d.ok()) << d.status();
  std::set<std::vector<uint64_t>> all;
  for (const auto& seq : Sequences(d->train, 3)) all.insert(seq);
  EXPECT_EQ(all.size(), 256u);
  for (const auto& seq : Sequences(d->test, 3)) all.insert(seq);
  EXPECT_EQ(all.size(), 512u);
  for (const auto& seq : all) {
    for (uint64_t v : seq) EXPECT_LT(v, 8u);
  }
  // Targets are Min-IP's.
  int32_t want[3];
  MinIpTargets(&d->test.tokens[0], 3, want);
  EXPECT_EQ(std::vector<int32_t>(want, want + 3),
            std::vector<int32_t>(d->test.targets.begin(), d->test.targets.begin() + 3));
}

// A pool of 495 vectors (every weight-4 vector of m = 12) forms 495^3
// sequences, too many to enumerate: training draws with replacement and a
// test sequence equal to a training one is drawn again.
TEST(PoolSplitTest, SampledSequencesSplitKeepsTestOutOfTraining) {
  DatasetSpec spec = Pool();
  spec.pool_size = 0;
  spec.split = PoolSplit::kSequences;
  spec.train_size = 20000;
  spec.test_size = 2000;
  auto d = BuildDataset(spec);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->train.size, 20000);
  EXPECT_EQ(d->test.size, 2000);
  const auto train = Sequences(d->train, 3);
  const std::set<std::vector<uint64_t>> train_set(train.begin(), train.end());
  for (const auto& seq : Sequences(d->test, 3)) EXPECT_EQ(train_set.count(seq), 0u);
  const std::set<uint64_t> tokens(d->train.tokens.begin(), d->train.tokens.end());
  EXPECT_EQ(tokens.size(), 495u);  // 60,000 draws of 495 vectors reach them all
  EXPECT_GE(HardTriples(d->train), 10000);
}

TEST(PoolSplitTest, RefusesMoreSequencesThanThePoolFormsAndTooManyVectors) {
  DatasetSpec spec = Pool();
  spec.m = 3;
  spec.weight = 0;
  spec.pool_size = 0;
  spec.split = PoolSplit::kSequences;
  spec.train_size = 400;
  spec.test_size = 200;
  auto d = BuildDataset(spec);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(d.status().message(),
              HasSubstr("dataset.train_size + dataset.test_size must be in 1..512"));
  EXPECT_THAT(d.status().message(), HasSubstr("got 400 + 200 = 600"));
  spec.m = 24;  // 2^24 vectors: too many to enumerate
  d = BuildDataset(spec);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(d.status().message(),
              HasSubstr("dataset.pool_size 0 (every vector) needs at most 1048576"));
  spec.m = 3;
  spec.split = static_cast<PoolSplit>(7);
  d = BuildDataset(spec);
  EXPECT_THAT(d.status().message(), HasSubstr("dataset.split must be one of tokens, sequences"));
}

}  // namespace
}  // namespace ranksweep::trainer
