// docs/LIMITS.md's "Every range check" table against the validators: each
// row's limit is parsed and the validator it names is probed at the bounds
// (the bound accepted, one past it refused; NaN refused for reals). A row
// must have a probe here or say "probed elsewhere" or have no numeric range
// (names, "must equal"); a probe must have a row. So the table and the code
// cannot drift apart silently.
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/spec/result_metrics.h"
#include "common/spec/result_validation.h"
#include "common/spec/spec.h"
#include "common/temp_dir.h"
#include "gtest/gtest.h"
#include "server/core/clock.h"
#include "server/core/coordinator.h"
#include "server/core/log.h"
#include "server/core/store.h"

namespace ranksweep::server {
namespace {

struct Row {
  std::string where, field, limit;
};

std::vector<Row> ReadTable() {
  const char kLimitsDoc[] = "docs/LIMITS.md";
  std::ifstream in(std::string(RANKSWEEP_SOURCE_DIR) + "/" + kLimitsDoc);
  EXPECT_TRUE(in.good());
  std::vector<Row> rows;
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    if (line == "| where | field | limit |") {
      inside = true;
      continue;
    }
    if (!inside) continue;
    if (line.empty()) break;
    if (line.rfind("|---", 0) == 0) continue;
    std::vector<std::string> cells = absl::StrSplit(line, '|');
    // "| a | b | c |" splits into "", a, b, c, "".
    EXPECT_EQ(cells.size(), 5u) << line;
    if (cells.size() != 5) continue;
    rows.push_back(Row{std::string(absl::StripAsciiWhitespace(cells[1])),
                       std::string(absl::StripAsciiWhitespace(cells[2])),
                       std::string(absl::StripAsciiWhitespace(cells[3]))});
  }
  return rows;
}

// A bound as the table writes it: a number ("10,000,000", "-1", "inf") or a
// name the probe resolves ("m", "code_weight-1", "max_steps").
double Bound(std::string text, const std::map<std::string, double>& symbols) {
  text = absl::StrReplaceAll(text, {{",", ""}});
  auto it = symbols.find(text);
  if (it != symbols.end()) return it->second;
  if (text == "inf") return INFINITY;
  return std::stod(text);
}

// The range a limit states, from the text after an optional "`cond`: ".
struct Range {
  bool real = false;
  double lo = 0, hi = 0;
  bool open_lo = false, open_hi = false;
  bool zero_is_default = false;  // "(0 = ...)": 0 is accepted below lo
  bool has_lower = true;         // false: "at most N bytes"
};

std::optional<Range> ParseLimit(const std::string& limit,
                                const std::map<std::string, double>& symbols) {
  std::string text = limit;
  static const std::regex cond(R"(^`[^`]*`[^:]*: )");
  text = std::regex_replace(text, cond, "");
  static const std::regex ints(R"(^(-?[0-9][0-9,]*)\.\.([A-Za-z_\-0-9,]+))");
  static const std::regex reals(R"(^([\[(])(-?[0-9.]+), (-?[0-9.]+|inf)([\])]))");
  static const std::regex at_least(R"(^at least (-?[0-9]+))");
  static const std::regex at_most(R"(^at most ([0-9,]+) bytes)");
  std::smatch m;
  Range r;
  r.zero_is_default = text.find("(0 = ") != std::string::npos;
  if (std::regex_search(text, m, ints)) {
    r.lo = Bound(m[1], symbols);
    r.hi = Bound(m[2], symbols);
  } else if (std::regex_search(text, m, reals)) {
    r.real = true;
    r.open_lo = m[1] == "(";
    r.lo = Bound(m[2], symbols);
    r.hi = Bound(m[3], symbols);
    r.open_hi = m[4] == ")";
  } else if (std::regex_search(text, m, at_least)) {
    r.lo = Bound(m[1], symbols);
    r.hi = 1e15;  // no upper bound: probe a large value
  } else if (std::regex_search(text, m, at_most)) {
    r.lo = 0;
    r.hi = Bound(m[1], symbols);
    r.has_lower = false;
  } else {
    return std::nullopt;
  }
  return r;
}

// ---------------------------------------------------------------- probes

// Valid bases the probes change one field of.
DatasetSpec Exhaustive() {
  DatasetSpec d;
  d.m = 2;
  d.seq_len = 3;
  return d;
}
DatasetSpec Witness() {
  DatasetSpec d;
  d.kind = DatasetKind::kWitness;
  d.m = 24;
  d.code_weight = 8;
  d.max_overlap = 4;
  d.num_queries = 12;
  return d;
}
DatasetSpec Pool() {
  DatasetSpec d;
  d.kind = DatasetKind::kPool;
  d.m = 8;
  d.seq_len = 3;
  d.pool_size = 100;
  d.train_size = 10;
  d.test_size = 5;
  return d;
}
SweepSpec Sweep() {
  SweepSpec s;
  s.name = "limits";
  s.dataset = Exhaustive();
  s.heads.push_back(HeadSpec());
  s.ranks = {1};
  s.seed_count = 1;
  return s;
}
SeedResult Result() {
  SeedResult r;
  r.train = SplitMetrics{4, 1.0, 0.5, 0.5, 0.25};
  r.test = SplitMetrics{2, 1.0, 0.5, 0.5, 0.25};
  r.final_loss = 0.1;
  r.steps = 10;
  r.wall_seconds = 1;
  r.device = "cpu";
  return r;
}
std::vector<int> Distinct(double n) {
  std::vector<int> v;
  for (int i = 1; i <= static_cast<int>(n); ++i) v.push_back(i);
  return v;
}
std::vector<uint64_t> Seeds(double n) {
  std::vector<uint64_t> v;
  for (uint64_t i = 0; i < static_cast<uint64_t>(n); ++i) v.push_back(i);
  return v;
}
int I(double v) { return static_cast<int>(v); }

struct Probe {
  std::function<absl::Status(double)> check;
  std::map<std::string, double> symbols;
  bool count = false;  // the field is a list's length: nothing lies below 0
};

// The coordinator the request probes call: a fresh store in a temp dir.
class CoordinatorUnderTest {
 public:
  CoordinatorUnderTest() {
    store_ = std::move(*Store::Open(dir_.File("limits.db")));
    coordinator_ = std::make_unique<Coordinator>(store_.get(), &clock_);
    WorkerRegistration reg;
    reg.hostname = "h";
    worker_ = coordinator_->RegisterWorker(reg)->worker_id;
  }
  ~CoordinatorUnderTest() {
    coordinator_.reset();
    store_.reset();
  }
  Coordinator& c() { return *coordinator_; }
  const std::string& worker() const { return worker_; }

 private:
  TempDir dir_;
  ManualClock clock_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Coordinator> coordinator_;
  std::string worker_;
};

absl::Status Register(Coordinator& c, const std::function<void(WorkerRegistration&)>& edit) {
  WorkerRegistration reg;
  reg.hostname = "h";
  edit(reg);
  return c.RegisterWorker(reg).status();
}

std::map<std::string, Probe> Probes(CoordinatorUnderTest& cut) {
  Coordinator& co = cut.c();
  const std::string w = cut.worker();
  auto sweep = [](std::function<void(SweepSpec&, double)> edit) {
    return [edit](double v) {
      SweepSpec s = Sweep();
      edit(s, v);
      return ValidateSweepSpec(s);
    };
  };
  auto dataset = [](DatasetSpec (*base)(), std::function<void(DatasetSpec&, double)> edit) {
    return [base, edit](double v) {
      DatasetSpec d = base();
      edit(d, v);
      return ValidateDataset(d);
    };
  };
  auto head = [](std::function<void(HeadSpec&, double)> edit) {
    return [edit](double v) {
      HeadSpec h;
      edit(h, v);
      return ValidateHead(h, Exhaustive());
    };
  };
  auto train = [](std::function<void(TrainSpec&, double)> edit) {
    return [edit](double v) {
      TrainSpec t;
      edit(t, v);
      return ValidateTrain(t);
    };
  };
  auto result = [](std::function<void(SeedResult&, double)> edit) {
    return [edit](double v) {
      SeedResult r = Result();
      edit(r, v);
      return ValidateSeedResult(r, 100);
    };
  };
  auto text = [](double v) { return std::string(static_cast<size_t>(v), 'x'); };
  std::map<std::string, Probe> p;
  p["SweepSpec|`name`"] = {sweep([&](SweepSpec& s, double v) { s.name = text(v); })};
  p["SweepSpec|`heads`"] = {sweep([](SweepSpec& s, double v) {
    s.heads.assign(static_cast<size_t>(v), HeadSpec());
  })};
  p["SweepSpec|`ranks`"] = {sweep([](SweepSpec& s, double v) { s.ranks = Distinct(v); })};
  p["SweepSpec|`ranks[]`"] = {sweep([](SweepSpec& s, double v) { s.ranks = {I(v)}; })};
  p["SweepSpec|`seeds`"] = {sweep([](SweepSpec& s, double v) {
    s.seeds = Seeds(v);
    s.seed_count = 0;
  })};
  p["SweepSpec|`seed_count`"] = {sweep([](SweepSpec& s, double v) { s.seed_count = I(v); })};
  p["SweepSpec|`priority`"] = {sweep([](SweepSpec& s, double v) { s.priority = I(v); })};
  p["SweepSpec|`prune.eta`"] = {sweep([](SweepSpec& s, double v) {
    s.prune.rule = PruneRule::kHalving;
    s.prune.eta = I(v);
  })};
  p["SweepSpec|`prune.min_steps`"] = {sweep([](SweepSpec& s, double v) {
    s.prune.rule = PruneRule::kHalving;
    s.prune.min_steps = I(v);
  })};
  p["SweepSpec|`prune.margin`"] = {sweep([](SweepSpec& s, double v) {
    s.prune.rule = PruneRule::kHalving;
    s.prune.margin = v;
  })};
  p["SweepSpec|`axes[].values`"] = {sweep([](SweepSpec& s, double v) {
    SweepAxis lr{"lr", {}};
    for (int i = 1; i <= I(v); ++i) lr.values.push_back(i * 1e-3);
    s.axes = {lr};
  })};
  p["DatasetSpec|`m`"] = {dataset(Witness, [](DatasetSpec& d, double v) {
    d.m = I(v);
    d.code_weight = 1;
    d.max_overlap = 0;
  })};
  p["DatasetSpec|`seq_len`"] = {dataset(Pool, [](DatasetSpec& d, double v) { d.seq_len = I(v); })};
  p["DatasetSpec|`m * seq_len`"] = {dataset(Exhaustive, [](DatasetSpec& d, double v) {
    d.m = 1;
    d.seq_len = I(v);
  })};
  p["DatasetSpec|`code_weight`"] = {
      dataset(Witness, [](DatasetSpec& d, double v) { d.code_weight = I(v); d.max_overlap = 0; }),
      {{"m", 24}}};
  p["DatasetSpec|`max_overlap`"] = {
      dataset(Witness, [](DatasetSpec& d, double v) { d.max_overlap = I(v); }),
      {{"code_weight-1", 7}}};
  p["DatasetSpec|`num_queries`"] = {
      dataset(Witness, [](DatasetSpec& d, double v) { d.num_queries = I(v); })};
  // Every vector of the weight: m - 1 leaves C(8, 7) = 8, m leaves one,
  // too few for a pool.
  p["DatasetSpec|`weight`"] = {dataset(Pool,
                                       [](DatasetSpec& d, double v) {
                                         d.pool_size = 0;
                                         d.weight = I(v);
                                       }),
                               {{"m-1", 7}}};
  p["DatasetSpec|`bernoulli_p`"] = {
      dataset(Pool, [](DatasetSpec& d, double v) { d.bernoulli_p = v; })};
  // Pool's m = 8 Bernoulli vectors: a universe of 2^8.
  p["DatasetSpec|`pool_size`"] = {
      dataset(Pool, [](DatasetSpec& d, double v) { d.pool_size = I(v); }), {{"universe", 256}}};
  // Every vector of {0,1}^3 forms 8^3 = 512 sequences of 3.
  p["DatasetSpec|`train_size + test_size`"] = {
      dataset(Pool,
              [](DatasetSpec& d, double v) {
                d.m = 3;
                d.pool_size = 0;
                d.split = PoolSplit::kSequences;
                d.test_size = 0;
                d.train_size = I(v);
              }),
      {{"sequences", 512}}};
  // Without a test split (test_size 0) only the train pool must keep a
  // vector; the share's range itself is [0, 1).
  p["DatasetSpec|`test_pool_share`"] = {dataset(Pool, [](DatasetSpec& d, double v) {
    d.test_size = 0;
    d.test_pool_share = v;
  })};
  p["DatasetSpec|`train_size`"] = {
      dataset(Pool, [](DatasetSpec& d, double v) { d.train_size = I(v); })};
  p["DatasetSpec|`test_size`"] = {
      dataset(Pool, [](DatasetSpec& d, double v) { d.test_size = I(v); })};
  p["DatasetSpec|`hard_share`"] = {
      dataset(Pool, [](DatasetSpec& d, double v) { d.hard_share = v; })};
  p["HeadSpec|`hidden`"] = {head([](HeadSpec& h, double v) { h.hidden = Distinct(v); }), {}, true};
  p["HeadSpec|`hidden[]`"] = {head([](HeadSpec& h, double v) { h.hidden = {I(v)}; })};
  p["HeadSpec|`value_dim`"] = {head([](HeadSpec& h, double v) { h.value_dim = I(v); })};
  p["HeadSpec|`score_dim`"] = {head([](HeadSpec& h, double v) { h.score_dim = I(v); })};
  p["HeadSpec|`num_heads`"] = {head([](HeadSpec& h, double v) {
    h.kind = HeadKind::kMultiheadKernel;
    h.num_heads = I(v);
  })};
  p["HeadSpec|`relu_eps`"] = {head([](HeadSpec& h, double v) {
    h.feature_map = FeatureMap::kReluEps;
    h.relu_eps = v;
  })};
  p["HeadSpec|`beta`"] = {head([](HeadSpec& h, double v) { h.beta = v; })};
  p["TrainSpec|`lr`"] = {train([](TrainSpec& t, double v) { t.lr = v; })};
  p["TrainSpec|`beta1`"] = {train([](TrainSpec& t, double v) { t.beta1 = v; })};
  p["TrainSpec|`beta2`"] = {train([](TrainSpec& t, double v) { t.beta2 = v; })};
  p["TrainSpec|`eps`"] = {train([](TrainSpec& t, double v) { t.eps = v; })};
  p["TrainSpec|`weight_decay`"] = {train([](TrainSpec& t, double v) { t.weight_decay = v; })};
  p["TrainSpec|`batch_size`"] = {train([](TrainSpec& t, double v) { t.batch_size = I(v); })};
  p["TrainSpec|`max_steps`"] = {train([](TrainSpec& t, double v) { t.max_steps = I(v); })};
  p["TrainSpec|`eval_every`"] = {train([](TrainSpec& t, double v) { t.eval_every = I(v); })};
  p["TrainSpec|`early_stop_evals`"] = {
      train([](TrainSpec& t, double v) { t.early_stop_evals = I(v); })};
  p["TrainSpec|`warmup_steps`"] = {
      train([](TrainSpec& t, double v) {
        t.max_steps = 500;
        t.warmup_steps = I(v);
      }),
      {{"max_steps", 500}}};
  p["TaskSpec|`rank`"] = {[](double v) {
    TaskSpec t;
    t.dataset = Exhaustive();
    t.rank = I(v);
    return ValidateTaskSpec(t);
  }};
  p["TaskSpec|`seeds`"] = {[](double v) {
    TaskSpec t;
    t.dataset = Exhaustive();
    t.seeds = Seeds(v);
    return ValidateTaskSpec(t);
  }};
  p["SeedResult|`train.sequences`"] = {
      result([](SeedResult& r, double v) { r.train.sequences = static_cast<int64_t>(v); })};
  p["SeedResult|`test.sequences`"] = {
      result([](SeedResult& r, double v) { r.test.sequences = static_cast<int64_t>(v); })};
  // Position accuracy must also be at least exact accuracy: probed with
  // exact accuracy 0 so that only the range decides.
  p["SeedResult|`train.position_accuracy`, `test.position_accuracy`"] = {
      result([](SeedResult& r, double v) {
        r.train = SplitMetrics{4, v, 0, 1, 0};
        r.test = SplitMetrics{2, v, 0, 1, 0};
      })};
  p["SeedResult|`train.exact_accuracy`, `test.exact_accuracy`"] = {
      result([](SeedResult& r, double v) {
        r.train = SplitMetrics{4, 1, v, 1 - v, 0};
        r.test = SplitMetrics{2, 1, v, 1 - v, 0};
      })};
  p["SeedResult|`train.error`, `test.error`"] = {result([](SeedResult& r, double v) {
    r.train = SplitMetrics{4, 1, 1 - v, v, 0};
    r.test = SplitMetrics{2, 1, 1 - v, v, 0};
  })};
  p["SeedResult|`train.max_abs_error`, `test.max_abs_error`"] = {
      result([](SeedResult& r, double v) { r.train.max_abs_error = r.test.max_abs_error = v; })};
  p["SeedResult|`final_loss`"] = {result([](SeedResult& r, double v) { r.final_loss = v; })};
  p["SeedResult|`steps`"] = {
      result([](SeedResult& r, double v) { r.steps = static_cast<int64_t>(v); }),
      {{"max_steps", 100}}};
  p["SeedResult|`first_exact_step`"] = {
      result([](SeedResult& r, double v) {
        SetMetric("first_exact_step", static_cast<int64_t>(v), &r);
      }),
      {{"max_steps", 100}}};
  p["SeedResult|`final_test_loss`"] = {result([](SeedResult& r, double v) {
    r.test = SplitMetrics{2, 1, 1, 0, 0};
    SetMetric("final_test_loss", v, &r);
  })};
  p["SeedResult|`wall_seconds`"] = {result([](SeedResult& r, double v) { r.wall_seconds = v; })};
  p["SeedResult|`device`"] = {result([&](SeedResult& r, double v) { r.device = text(v); })};
  p["SeedResult|`facts.*`"] = {result([](SeedResult& r, double v) {
    const int64_t n = static_cast<int64_t>(v);
    r.facts = DatasetFacts{n, n, n, n, n};
  })};
  auto want = [&co, w](std::function<void(TaskWant&, double)> edit) {
    return [&co, w, edit](double v) {
      TaskWant next;
      edit(next, v);
      // No result: only `next` is checked, before anything is written.
      return co.Complete(w, {}, next).status();
    };
  };
  p["CompleteTasks|`next.max_tasks`"] = {want([](TaskWant& t, double v) { t.max_tasks = I(v); })};
  p["CompleteTasks|`next.max_seeds`"] = {want([](TaskWant& t, double v) { t.max_seeds = I(v); })};
  p["CompleteTasks|`next.memory_bytes`"] = {
      want([](TaskWant& t, double v) { t.memory_bytes = static_cast<int64_t>(v); })};
  p["RegisterWorker|`slots`"] = {[&co](double v) {
    return Register(co, [v](WorkerRegistration& r) { r.slots = I(v); });
  }};
  p["RegisterWorker|`hostname`, `device`, `device_name`"] = {[&co, text](double v) {
    return Register(co, [&](WorkerRegistration& r) { r.hostname = r.device = r.device_name = text(v); });
  }};
  p["RegisterWorker|`version.build_id`, `version.torch_version`, `version.cuda_version`"] = {
      [&co, text](double v) {
        return Register(co, [&](WorkerRegistration& r) {
          r.version = VersionManifest{text(v), text(v), text(v)};
        });
      }};
  p["AcquireTasks|`max_tasks`"] = {[&co, w](double v) {
    return co.Acquire(w, I(v), 1).status();
  }};
  p["AcquireTasks|`max_seeds`"] = {[&co, w](double v) {
    return co.Acquire(w, 1, I(v)).status();
  }};
  p["AcquireTasks|`memory_bytes`"] = {[&co, w](double v) {
    return co.Acquire(w, 1, 1, static_cast<int64_t>(v)).status();
  }};
  p["FailTask|`reason`"] = {[&co, w, text](double v) {
    return co.Fail(w, {}, text(v), false);
  }};
  p["QuarantineWorker|`since_unix_ms`"] = {[&co, w](double v) {
    return co.Quarantine(w, static_cast<int64_t>(v), "limits").status();
  }};
  return p;
}

// Rows that state no numeric range (names, relations) and so have no probe.
bool StatesNoRange(const Row& row) {
  return row.limit.find("probed elsewhere") != std::string::npos ||
         row.limit.rfind("must equal", 0) == 0 || row.limit == "any value" ||
         row.limit.rfind("`", 0) == 0 || row.limit.rfind("a number the protocol", 0) == 0 ||
         row.limit.find("characters of") != std::string::npos ||
         row.limit.rfind("at least 1: ", 0) == 0 || row.where == "wire TrainSpec";
}

void ExpectAccepted(const Probe& p, double v, const std::string& what) {
  absl::Status s = p.check(v);
  EXPECT_TRUE(s.ok()) << what << ": " << v << " should be accepted: " << s;
}
void ExpectRefused(const Probe& p, double v, const std::string& what) {
  absl::Status s = p.check(v);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument)
      << what << ": " << v << " should be refused: " << s;
}

TEST(LimitsDocTest, EveryRowHoldsAtItsBoundsAndEveryProbeHasARow) {
  SetLogEnabled(false);
  CoordinatorUnderTest cut;
  std::map<std::string, Probe> probes = Probes(cut);
  const std::vector<Row> rows = ReadTable();
  ASSERT_GE(rows.size(), 60u);
  std::set<std::string> used;
  for (const Row& row : rows) {
    const std::string key = row.where + "|" + row.field;
    auto it = probes.find(key);
    if (it == probes.end()) {
      EXPECT_TRUE(StatesNoRange(row)) << "no probe for the row " << key << ": " << row.limit;
      continue;
    }
    used.insert(key);
    const Probe& p = it->second;
    std::optional<Range> r = ParseLimit(row.limit, p.symbols);
    ASSERT_TRUE(r.has_value()) << key << ": cannot read the limit \"" << row.limit << "\"";
    if (r->real) {
      if (r->open_lo) ExpectRefused(p, r->lo, key); else ExpectAccepted(p, r->lo, key);
      ExpectRefused(p, std::nextafter(r->lo, -INFINITY), key);
      if (std::isinf(r->hi)) {
        ExpectAccepted(p, 1e300, key);
        ExpectRefused(p, INFINITY, key);
      } else {
        if (r->open_hi) ExpectRefused(p, r->hi, key); else ExpectAccepted(p, r->hi, key);
        ExpectRefused(p, std::nextafter(r->hi, INFINITY), key);
      }
      ExpectRefused(p, NAN, key);
      continue;
    }
    ExpectAccepted(p, r->lo, key);
    ExpectAccepted(p, r->hi, key);
    if (r->zero_is_default && r->lo == 1) {
      ExpectAccepted(p, 0, key);
      ExpectRefused(p, -1, key);
    } else if (r->has_lower && !(p.count && r->lo == 0)) {
      ExpectRefused(p, r->lo - 1, key);
    }
    if (r->hi < 1e15) ExpectRefused(p, r->hi + 1, key);
  }
  for (const auto& [key, probe] : probes) {
    EXPECT_EQ(used.count(key), 1u) << "the probe " << key << " has no row in docs/LIMITS.md";
  }
}

}  // namespace
}  // namespace ranksweep::server
