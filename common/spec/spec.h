// The experiment vocabulary shared by every part of ranksweep: what a sweep
// asks for, what one training task is, and what one seed's result holds.
//
// This header depends on Abseil only (no gRPC, no protobuf, no LibTorch), so
// the trainer library, the coordinator and the CLI all speak the same types.
// The JSON form (spec_json.h) and the protobuf form (proto/convert.h) are
// translations of these structs, field for field.
//
// Thread-safety: plain value types; no shared state.
#ifndef RANKSWEEP_COMMON_SPEC_SPEC_H_
#define RANKSWEEP_COMMON_SPEC_SPEC_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/spec/curve.h"

namespace ranksweep {

// ---------------------------------------------------------------- datasets

enum class DatasetKind {
  kExhaustive,  // every sequence in ({0,1}^m)^N; allowed when m*N <= 18
  kWitness,     // a witness family built from a constant-weight code
  kPool,        // random tokens split into disjoint train / test pools
};

// kPool: how the test split is kept apart from the training split.
enum class PoolSplit {
  // Disjoint tokens: the pool is split into a train pool and a test pool
  // (test_pool_share), and each split's sequences use only its own pool's
  // vectors, so no test vector appears in any training sequence.
  kTokens,
  // Disjoint sequences: train and test sequences are built from the one
  // pool, and no test sequence equals a training sequence; the same tokens
  // appear on both sides (test_pool_share is not used).
  kSequences,
};

struct DatasetSpec {
  DatasetKind kind = DatasetKind::kExhaustive;
  int m = 3;        // token dimension, 1..64
  int seq_len = 3;  // N, tokens per sequence, 1..64
  // Score only the last position (the causal final-query formulation)
  // instead of every position.
  bool final_query_only = false;
  uint64_t data_seed = 0;  // makes the dataset deterministic

  // kWitness: queries are codewords of a constant-weight code in {0,1}^m with
  // weight `code_weight` and pairwise overlap <= `max_overlap`, taken in
  // lexicographic-greedy order; `num_queries` of them are used (0 = all).
  int code_weight = 8;
  int max_overlap = 4;
  int num_queries = 0;

  // kPool: tokens have constant weight `weight` (when > 0) or are Bernoulli
  // with probability `bernoulli_p` (when weight == 0). `pool_size` distinct
  // vectors are drawn and shuffled; pool_size 0 takes every vector (all
  // C(m, weight) of them, or all 2^m when weight == 0), enumerated, which is
  // allowed while there are at most 2^20.
  // split kTokens: the pool splits into a test pool of
  // round(pool_size * test_pool_share) vectors and a train pool of the rest,
  // and `train_size` / `test_size` sequences are built inside their own
  // pool, drawn with replacement.
  // split kSequences: both splits draw from the whole pool. When the pool
  // has at most 2^22 distinct sequences of seq_len tokens they are
  // enumerated and the splits are disjoint samples without replacement
  // (train_size + test_size of them at most); else train sequences are drawn
  // with replacement and a test sequence equal to a training one is drawn
  // again.
  // A share `hard_share` of each split's sequences are hard triples
  // (candidate overlaps 1 apart), as far as the pool has them.
  PoolSplit split = PoolSplit::kTokens;
  int weight = 0;
  double bernoulli_p = 0.5;
  int pool_size = 0;
  double test_pool_share = 0.5;
  int train_size = 0;
  int test_size = 0;
  double hard_share = 0.5;
};

// ---------------------------------------------------------------- heads

enum class HeadKind {
  kKernel,           // normalized nonnegative kernel attention of rank r
  kSoftmax,          // dense softmax attention; has no rank
  kSignedKernel,     // kernel with unconstrained (signed) features
  kMultiheadKernel,  // `num_heads` kernel heads of rank r each
};

enum class FeatureMap {
  kEluPlusOne,  // elu(z) + 1
  kReluEps,     // relu(z) + eps
  kSoftplus,    // softplus(z)
  kExp,         // exp(z)
  kFavorPlus,   // positive random features exp(w.z - |z|^2/2)/sqrt(r)
};

// A head built from weights set by hand instead of training (docs/SCIENCE.md,
// "Exact constructions"). kNone means "train it".
enum class Construction {
  kNone,
  kRank1,         // kernel rank 1, exact for N <= 2
  kIndicator,     // kernel with 2^m indicator features, m <= 12
  kSoftmaxExact,  // softmax with m-dim scores W_q = -beta I, W_k = I
};

// One head as a sweep lists it. The rank is not part of it: a sweep crosses
// heads with ranks, and a task carries its rank separately (TaskSpec::rank).
struct HeadSpec {
  HeadKind kind = HeadKind::kKernel;
  FeatureMap feature_map = FeatureMap::kEluPlusOne;
  // Hidden widths of the learned token map before the feature map; empty
  // means a linear map.
  std::vector<int> hidden = {};
  int num_heads = 1;       // kMultiheadKernel only, 1..64
  int value_dim = 0;       // width of the value map; 0 = m
  int score_dim = 0;       // kSoftmax only: width of W_q x, W_k x; 0 = m
  double relu_eps = 1e-3;  // kReluEps only
  Construction construction = Construction::kNone;
  double beta = 0.0;       // constructions: sharpness; 0 = choose safely
};

// ---------------------------------------------------------------- training

enum class LossKind {
  kMse,           // squared error of the scalar readout
  kCrossEntropy,  // m+1 logits, each affine in the attention output
};

// The learning rate over the steps (LearningRateAt); linear warm-up
// (TrainSpec::warmup_steps) combines with either.
enum class LrSchedule {
  kConstant,  // lr on every step
  kCosine,    // cosine decay from lr after the warm-up to 0 at max_steps
};

struct TrainSpec {
  double lr = 1e-2;
  double beta1 = 0.9;
  double beta2 = 0.999;
  // Adam's epsilon, added to the root of the second moment's estimate:
  // (0, 1]. A larger one damps the steps of parameters whose gradients are
  // small (near an exact solution, where Min-IP training spends its end).
  double eps = 1e-8;
  double weight_decay = 0.0;
  int batch_size = 0;        // 0 = full batch
  int max_steps = 2000;
  int eval_every = 50;       // evaluate (and read the loss) every E steps
  int early_stop_evals = 3;  // stop once train is exact on k evals in a row; 0 = never
  LossKind loss = LossKind::kMse;
  LrSchedule schedule = LrSchedule::kConstant;
  int warmup_steps = 0;      // linear warm-up over the first W steps; 0 = none, 0..max_steps
};

// The learning rate of the `step`-th optimizer step (1-based, 1..max_steps),
// with T = max_steps and W = warmup_steps:
//   warm-up, step <= W:  lr * step / W
//   constant, step > W:  lr
//   cosine, step > W:    lr * (1 + cos(pi * (step - W) / (T - W))) / 2
// so the warm-up ends at lr on step W and the cosine reaches 0 on step T
// (the decay has no floor). Steps beyond T are computed as T. Pure function
// of the spec; the trainer calls it once per step, so a seed that stops early
// simply stops on the schedule where it was.
double LearningRateAt(const TrainSpec& t, int64_t step);

// ---------------------------------------------------------------- tasks

// One unit of training work: one (head, rank) on one dataset, for one or more
// seeds that train together in one fused program.
struct TaskSpec {
  DatasetSpec dataset;
  HeadSpec head;
  int rank = 1;  // feature rank r; ignored (0) for kSoftmax and constructions
  TrainSpec train;
  std::vector<uint64_t> seeds = {0};
};

// ---------------------------------------------------------------- sweeps

// ---------------------------------------------------------------- axes

// One recipe field that a sweep lists several values for: the grid crosses
// every value with head x rank x seed. `name` is one of AxisNames(); integer
// fields hold integral values (exact in a double up to 2^53).
struct SweepAxis {
  std::string name;
  std::vector<double> values;
};

enum class SweepMode {
  kGrid,    // every head x rank x seed
  kSearch,  // per ranked head, bisection over the sorted ranks (docs/ANALYSIS.md)
};

// Recipe pruning (docs/ANALYSIS.md, "Recipe pruning"): successive halving
// across the recipes of each (head, rank), on the training error at rungs.
enum class PruneRule {
  kNone,     // every recipe trains to its end
  kHalving,  // stop the recipes that are clearly losing at a rung
};

struct PruneSpec {
  PruneRule rule = PruneRule::kNone;
  // Reduction factor: at a rung with n recipes scored, the best
  // max(1, floor(n / eta)) go on. 2..16.
  int eta = 3;
  // The first rung's step, rounded up to an evaluation; later rungs are
  // eta times apart. 0 = max_steps / eta^3 (rounded up). 0..10^9.
  int min_steps = 0;
  // A recipe is stopped only when its mean training error at the rung is at
  // least this much above the best recipe's there. 0..1.
  double margin = 0.05;
};

struct SweepSpec {
  std::string name;
  DatasetSpec dataset;
  std::vector<HeadSpec> heads;
  std::vector<int> ranks;        // crossed with every head that has a rank
  std::vector<uint64_t> seeds;   // explicit list; see seed_count
  int seed_count = 0;            // when seeds is empty: seeds 0..seed_count-1
  TrainSpec train;
  int priority = 0;              // higher runs first, -100..100
  SweepMode mode = SweepMode::kGrid;
  // Serve cells already trained (same task and seed, same build) from the
  // store instead of training them again.
  bool reuse_results = true;
  // Recipe axes, in AxisNames() order, each name at most once. A field with
  // an axis takes the axis' values; its value in `dataset` / `train` is not
  // used. Empty: one recipe, the fields as they are.
  std::vector<SweepAxis> axes;
  PruneSpec prune;
};

// The rungs of pruning for one recipe's training (`train`, with the
// recipe's axis values applied): the first at min_steps (0: ceil(max_steps /
// eta^3)) rounded up to a multiple of eval_every, each next eta times the
// one before, every rung below max_steps (at most 16). Empty when the sweep
// does not prune or has one recipe.
std::vector<int64_t> PruneRungSteps(const SweepSpec& spec, const TrainSpec& train);

// True when cells of this head carry a rank (kernel-type heads that are
// trained, or the rank-1 construction). Softmax and the indicator
// construction have a rank fixed by the head itself.
bool HeadHasRank(const HeadSpec& head);

// True when a head's results cannot test the paper's rank bound because of
// how it is trained: a trained kernel-type head (HeadHasRank) under loss ce,
// whose argmax over m+1 logits is not the paper's readout and lets even a
// rank-1 kernel solve the witness family (docs/TRAINER.md).
bool ReadoutEscapesRankBound(const HeadSpec& head, const TrainSpec& train);

// Cells of the full grid: (ranked heads x ranks + rank-less heads) x seeds
// x recipes. Search mode creates fewer.
int64_t GridCellCount(const SweepSpec& spec);

// True when the sweep's cells have a test split: a pool dataset with
// test_size > 0, read from recipe 0 (a test_size axis lists it first).
bool HasTestSplit(const SweepSpec& spec);

// The seeds a sweep runs: `seeds` if given, else 0..seed_count-1.
std::vector<uint64_t> SweepSeeds(const SweepSpec& spec);

// ---------------------------------------------------------------- recipes
//
// A recipe is one choice of a value per axis. Recipes are numbered
// 0..RecipeCount-1 in cross-product order, the first axis slowest:
// with axes lr {a, b} and max_steps {x, y, z}, recipe 1 is (a, y) and 3 is
// (b, x). A sweep without axes has the one recipe 0. The numbering is part
// of the stored data (cells, results and groups carry it), so it never
// changes for a stored spec.

// The names that may be axes, in their canonical order: "lr",
// "weight_decay", "max_steps", "batch_size", "m", "weight", "num_queries",
// "pool_size", "train_size", "test_size", "schedule", "warmup_steps",
// "split", "hard_share", "test_pool_share".
// Every axis is one row of a table in spec.cc (how it parses, validates and
// applies a value).
const std::vector<std::string>& AxisNames();
bool IsAxisName(const std::string& name);
// Integer axes hold integral values; named axes (schedule) hold the index
// of a name ("constant" 0, "cosine" 1) and are written by name.
bool AxisIsInteger(const std::string& name);
bool AxisIsNamed(const std::string& name);
// Where the axis' field lives: "train.lr", "dataset.num_queries", ...
std::string AxisField(const std::string& name);

// Parses one command-line value of axis `name` ("0.003", "4000").
// InvalidArgument naming `field` when the text is not a number of the
// axis' type; ranges are checked by ValidateSweepSpec.
absl::StatusOr<double> ParseAxisValue(const std::string& name, const std::string& text,
                                      const std::string& field);
// The value as a label shows it: integers without a point, other numbers
// in their shortest form that reads back as the same double.
std::string FormatAxisValue(const std::string& name, double value);

// Gives axis `name` of `spec` the values a command-line flag lists: one
// value is written to the field and drops an axis of that name; several
// make (or replace) the axis, kept in AxisNames() order. InvalidArgument
// for a name that is not an axis or an empty list; values are checked by
// ValidateSweepSpec.
absl::Status SetAxisValues(const std::string& name, std::vector<double> values,
                           SweepSpec* spec);

// Keeps only the first training recipe: every training axis' first value
// (lr, max_steps, schedule, ...) is written to its field and the axis
// dropped (`submit --one-recipe`, to time or try a sweep without its recipe
// search). Dataset axes (m, pool_size, split, ...) are the problem's sizes,
// not its recipe, and stay. Returns what it dropped,
// "lr 0.01 (of 0.01,0.003,0.001)", axes joined by "; "; empty and `spec`
// unchanged when it has no training axis. Meant for a spec
// ValidateSweepSpec accepts (a first value is then valid too); an axis with
// an unknown name or no values is left as it is.
std::string KeepFirstRecipe(SweepSpec* spec);

// Number of recipes: the product of the axes' value counts (1 without axes).
int64_t RecipeCount(const SweepSpec& spec);
// The axes' values of `recipe`, one per axis, in axis order.
// `recipe` must be in 0..RecipeCount-1.
std::vector<double> RecipeValues(const SweepSpec& spec, int recipe);
// "lr=0.003 max_steps=4000"; empty for a sweep without axes.
std::string RecipeLabel(const SweepSpec& spec, int recipe);
// The value of axis `name` in `recipe`; nullopt-like false when the sweep
// has no such axis.
bool RecipeAxisValue(const SweepSpec& spec, int recipe, const std::string& name,
                     double* value);

// ---------------------------------------------------------------- results

// Facts a dataset reports about itself.
struct DatasetFacts {
  int64_t train_sequences = 0;
  int64_t test_sequences = 0;   // 0 when the dataset has no test split
  int64_t distinct_queries = 0; // distinct scored query tokens (train)
  // Witness families: the rank lower bound the family implies and the upper
  // bound n (distinct queries). 0 when not applicable.
  int64_t rank_lower_bound = 0;
  int64_t rank_upper_bound = 0;
};

struct SplitMetrics {
  int64_t sequences = 0;
  double position_accuracy = 0;  // share of scored positions right
  double exact_accuracy = 0;     // share of sequences with every scored position right
  double error = 1;              // 1 - exact_accuracy
  double max_abs_error = 0;      // max |prediction - target| (before rounding)
};

struct SeedResult {
  uint64_t seed = 0;
  SplitMetrics train;
  SplitMetrics test;   // sequences == 0 when the dataset has no test split
  double final_loss = 0;
  int64_t steps = 0;
  double wall_seconds = 0;
  std::string device;  // e.g. "cpu", "cuda:0 (NVIDIA H200)"
  DatasetFacts facts;
  // The optional metrics, by their index in kResultMetrics (common/spec/
  // result_metrics.h, which reads and writes them: GetMetric, SetMetric);
  // nullopt or past the end: missing. Inline for the first few, so that a
  // result read from the store (100,000 in a query) allocates nothing more.
  absl::InlinedVector<std::optional<double>, 4> metrics;
  // What each evaluation measured (common/spec/curve.h); empty for a head
  // trained for no step.
  Curve curve;
};

// ---------------------------------------------------------------- names

// Stable lower-case names used in JSON, YAML, the CLI and the database:
// "exhaustive" "witness" "pool"; "kernel" "softmax" "signed_kernel"
// "multihead_kernel"; "elu1" "relu_eps" "softplus" "exp" "favor"; "none"
// "rank1" "indicator" "softmax_exact"; "mse" "ce"; "grid".
const char* Name(DatasetKind v);
const char* Name(HeadKind v);
const char* Name(FeatureMap v);
const char* Name(Construction v);
const char* Name(LossKind v);
const char* Name(LrSchedule v);
const char* Name(SweepMode v);
const char* Name(PoolSplit v);  // "tokens" "sequences"
const char* Name(PruneRule v);  // "none" "halving"
// Parsers return InvalidArgument naming `field` and the allowed names.
absl::StatusOr<DatasetKind> ParseDatasetKind(const std::string& s, const std::string& field);
absl::StatusOr<HeadKind> ParseHeadKind(const std::string& s, const std::string& field);
absl::StatusOr<FeatureMap> ParseFeatureMap(const std::string& s, const std::string& field);
absl::StatusOr<Construction> ParseConstruction(const std::string& s, const std::string& field);
absl::StatusOr<LossKind> ParseLossKind(const std::string& s, const std::string& field);
absl::StatusOr<LrSchedule> ParseLrSchedule(const std::string& s, const std::string& field);
absl::StatusOr<PoolSplit> ParsePoolSplit(const std::string& s, const std::string& field);
absl::StatusOr<SweepMode> ParseSweepMode(const std::string& s, const std::string& field);
absl::StatusOr<PruneRule> ParsePruneRule(const std::string& s, const std::string& field);

// A short label for a head in tables: "kernel/elu1", "softmax",
// "multihead_kernel/elu1x4", "kernel/rank1*" (constructions end in '*').
std::string HeadLabel(const HeadSpec& head);

// ---------------------------------------------------------------- validation

// Limits every spec is held to. Each violation is an InvalidArgument whose
// message names the field (e.g. "dataset.m") and the allowed range.
struct SpecLimits {
  static constexpr int kMaxM = 64;
  static constexpr int kMaxSeqLen = 64;
  static constexpr int kMaxRank = 65536;
  static constexpr int kMaxExhaustiveBits = 18;  // m * N
  static constexpr int kMaxIndicatorM = 12;
  static constexpr int kMaxSeeds = 1024;
  static constexpr int kMaxHeads = 32;
  static constexpr int kMaxRanks = 64;
  static constexpr int64_t kMaxCells = 100000;
  static constexpr int kMaxSteps = 10000000;
  static constexpr int kMaxDatasetSequences = 10000000;
  // The largest witness family: n(2n-1) <= kMaxDatasetSequences queries.
  static constexpr int kMaxWitnessQueries = 2236;
  // Steps (words scanned plus overlap checks) the greedy witness code may
  // take: (24, 8, 4)'s full 759-word code takes 3.2e7.
  static constexpr uint64_t kMaxWitnessCodeSteps = 100000000;
  // pool_size 0 enumerates every vector: at most this many.
  static constexpr int64_t kMaxEnumeratedVectors = int64_t{1} << 20;
  // split sequences enumerates every sequence of the pool up to this many.
  static constexpr int64_t kMaxEnumeratedSequences = int64_t{1} << 22;
  static constexpr int kMaxNameLength = 128;
  static constexpr int kMaxNumHeads = 64;
  static constexpr int kMaxWidth = 65536;
  static constexpr int kMaxAxisValues = 64;
};

absl::Status ValidateDataset(const DatasetSpec& d);

// C(n, k), saturating at `cap` (0 when k is outside 0..n).
uint64_t Binomial(int n, int k, uint64_t cap);

// Pool datasets (kPool), saturating at 2^62:
// the distinct vectors the pool draws from (C(m, weight), or 2^m when
// weight == 0),
uint64_t PoolUniverse(const DatasetSpec& d);
// the vectors in the pool (pool_size, or the whole universe when 0),
int64_t PoolVectors(const DatasetSpec& d);
// and the distinct sequences of seq_len tokens they form, PoolVectors^seq_len.
uint64_t PoolSequenceCount(const DatasetSpec& d);
absl::Status ValidateHead(const HeadSpec& h, const DatasetSpec& d);
absl::Status ValidateTrain(const TrainSpec& t);
absl::Status ValidateTaskSpec(const TaskSpec& t);
absl::Status ValidateSweepSpec(const SweepSpec& s);

// ---------------------------------------------------------------- memory

// Sequences a dataset holds, train and test, as far as the spec alone tells:
// exact for exhaustive (2^(m*N)) and pool (train_size, test_size) datasets;
// for a witness family n(2n-1) train sequences with n = num_queries, or, when
// num_queries is 0, n bounded by the packing bound C(m, t+1) / C(w, t+1)
// (w = code_weight, t = max_overlap) and by the family limit (n <= 2236).
struct DatasetSize {
  int64_t train = 0;
  int64_t test = 0;
};
DatasetSize EstimateDatasetSize(const DatasetSpec& d);
// train + test of EstimateDatasetSize.
int64_t EstimateDatasetSequences(const DatasetSpec& d);

// An upper-bound-style estimate of the host (or device) memory one task
// needs, affine in the number of seeds trained together:
// total(S) = fixed_bytes + S * per_seed_bytes. It follows the shapes the
// trainer allocates (worker/trainer/heads.cc, fused_trainer.cc, fused_adam.cc), in float32:
//
//   P  parameters of one seed's head (token maps with their hidden widths,
//      the FAVOR+ projection, value map, readout; softmax: W_q, W_k with
//      score_dim, value map, readout).
//   A  activations of one sequence that autograd keeps for backward
//      (per token: hidden layers 2w each and the feature maps ~3Hr for the
//      query and the key map, values, numerators and attention outputs
//      3Hdv, readout 2KHdv; per sequence: the attention matrix N*N*H; the
//      input tokens N*m).
//   per_seed = 4 bytes * (8 P + A max(2 B, C)): 4 P for parameters,
//      gradients and the two Adam moments and 4 P more for the fused
//      optimizer's per-element seed index (int64), mask and step
//      temporaries; 2 A B for one training batch of B sequences (batch_size,
//      or the whole train split) forward plus backward, or A C for one
//      evaluation chunk (C <= the largest split, the trainer's 16M-float
//      chunking taken for one seed, which bounds it for any S), whichever
//      is larger: steps and evaluations do not overlap.
//   fixed = the dataset: 12 bytes per token on the host (packed token,
//      int32 target) for both splits, the train split as float tensors
//      (N*(m+1) floats per sequence) and once more for the split being
//      evaluated, plus 64 bytes per pool vector while a pool is drawn and 4
//      bytes per sequence when split sequences enumerates them.
//
// The binary's own footprint (code, allocator, LibTorch) is not included.
// docs/LIMITS.md compares the estimate with measured peak RSS; it lies 1-3x
// above the measured increase. Saturates at INT64_MAX. Meaningful for a spec
// that passes ValidateTaskSpec; t.seeds only matters to
// EstimateTaskMemoryBytes.
struct MemoryEstimate {
  int64_t fixed_bytes = 0;
  int64_t per_seed_bytes = 0;
  // fixed_bytes + seeds * per_seed_bytes, saturating at INT64_MAX.
  int64_t Total(int64_t seeds) const;
  // The most seeds whose Total fits in `bytes` (0 when not even one does).
  int64_t SeedsThatFit(int64_t bytes) const;
};
MemoryEstimate EstimateTaskMemory(const TaskSpec& t);
// EstimateTaskMemory(t).Total(t.seeds.size()).
int64_t EstimateTaskMemoryBytes(const TaskSpec& t);

// "512 B", "3.2 KiB", "64 GiB", "210 GiB": three significant digits at most.
std::string FormatBytes(int64_t bytes);

// The task a sweep cell runs: the sweep's dataset and training settings with
// recipe `recipe`'s axis values applied, one head, one rank, the given seeds.
// `recipe` must be in 0..RecipeCount-1.
TaskSpec MakeTaskSpec(const SweepSpec& sweep, int head_index, int rank, int recipe,
                      std::vector<uint64_t> seeds);
// Recipe 0: the whole task of a sweep without axes.
TaskSpec MakeTaskSpec(const SweepSpec& sweep, int head_index, int rank,
                      std::vector<uint64_t> seeds);

}  // namespace ranksweep

#endif  // RANKSWEEP_COMMON_SPEC_SPEC_H_
