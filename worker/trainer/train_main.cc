// ranksweep-train: runs one task spec locally and prints its per-seed results
// as JSON: {"facts": {...}, "seeds": [SeedResult, ...]}.
//
//   ranksweep-train [--spec task.json] [--dataset witness] [--head kernel]
//                   [--feature-map elu1] [--rank 8] [--seeds 0,1,2]
//                   [--max-steps 2000] [--device auto] ...
//   ranksweep-train ... --dump-dataset data.json   (writes the dataset, trains nothing)
//   ranksweep-train --sweep sweep.json [--device cuda] [--max-seeds 64] [--slots 1]
//       (every task of a grid sweep, --slots of them at once: a JSON line per
//        task with its time as it finishes, then the wall time of the whole
//        run; the sweep as `ranksweep submit --dry-run` prints it)
//
// Flags are Abseil flags, parsed as ranksweepd and ranksweep-worker parse
// theirs (common/flag_help.h): dashes or underscores, --help by dashed name,
// "did you mean" for an unknown flag, a bad value refused with its range.
// The flags given override the fields of --spec (or of the TaskSpec
// defaults). Needs no gRPC: only the trainer library and Abseil.
//
// Exit codes (common/exit_codes.h): 0 done; 1 bad flags or an invalid spec;
// 5 any other failure (a file that cannot be read, a training that failed).
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/did_you_mean.h"
#include "common/exit_codes.h"
#include "common/flag_help.h"
#include "common/flag_names.h"
#include "common/spec/spec.h"
#include "common/spec/spec_json.h"
#include "common/status_macros.h"
#include "common/version.h"
#include "ranksweep_build_id.h"  // RANKSWEEP_BUILD_ID (cmake/BuildId.cmake)
#include "worker/trainer/dataset.h"
#include "worker/trainer/trainer.h"

namespace ranksweep {
namespace {

// The defaults the task flags show and start from.
const TaskSpec& Default() {
  static const TaskSpec* spec = new TaskSpec();
  return *spec;
}

template <typename T>
std::vector<std::string> Strings(const std::vector<T>& values) {
  std::vector<std::string> out;
  for (const T& v : values) out.push_back(absl::StrCat(v));
  return out;
}

}  // namespace
}  // namespace ranksweep

// What to run and how.
ABSL_FLAG(std::string, spec, "",
          "Task spec JSON file; the task flags below override its fields. Empty = the "
          "TaskSpec defaults");
ABSL_FLAG(std::string, sweep, "",
          "Grid sweep JSON file (as `ranksweep submit --dry-run` prints it): train every "
          "task, --slots at once, printing a JSON line per task as it finishes and one for the "
          "whole sweep. Only --device, --max-seeds and --slots apply with it");
ABSL_FLAG(int, max_seeds, 64, "With --sweep: seeds fused per task, 1..1024");
ABSL_FLAG(int, slots, 1, "With --sweep: tasks trained at once, 1..64 (as a worker's --slots)");
ABSL_FLAG(std::string, device, "auto", "auto | cpu | cuda | cuda:N (auto: CUDA when present)");
ABSL_FLAG(std::string, dump_dataset, "",
          "Write the task's dataset as JSON to this file instead of training");
ABSL_FLAG(int, indent, 2, "JSON indent of the results, -1..16; -1 = compact");
// The task: one flag per TaskSpec field, by its JSON name.
ABSL_FLAG(std::string, dataset, ranksweep::Name(ranksweep::Default().dataset.kind),
          "dataset.kind: exhaustive | witness | pool");
ABSL_FLAG(int, m, ranksweep::Default().dataset.m, "dataset.m: token dimension, 1..64");
ABSL_FLAG(int, seq_len, ranksweep::Default().dataset.seq_len,
          "dataset.seq_len: tokens per sequence, 1..64");
ABSL_FLAG(bool, final_query_only, ranksweep::Default().dataset.final_query_only,
          "dataset.final_query_only: score only the last position");
ABSL_FLAG(uint64_t, data_seed, ranksweep::Default().dataset.data_seed,
          "dataset.data_seed: makes the dataset deterministic");
ABSL_FLAG(int, code_weight, ranksweep::Default().dataset.code_weight,
          "dataset.code_weight (witness)");
ABSL_FLAG(int, max_overlap, ranksweep::Default().dataset.max_overlap,
          "dataset.max_overlap (witness)");
ABSL_FLAG(int, num_queries, ranksweep::Default().dataset.num_queries,
          "dataset.num_queries (witness); 0 = the whole code");
ABSL_FLAG(int, weight, ranksweep::Default().dataset.weight, "dataset.weight (pool)");
ABSL_FLAG(double, bernoulli_p, ranksweep::Default().dataset.bernoulli_p,
          "dataset.bernoulli_p (pool)");
ABSL_FLAG(int, pool_size, ranksweep::Default().dataset.pool_size, "dataset.pool_size (pool)");
ABSL_FLAG(double, test_pool_share, ranksweep::Default().dataset.test_pool_share,
          "dataset.test_pool_share (pool)");
ABSL_FLAG(int, train_size, ranksweep::Default().dataset.train_size,
          "dataset.train_size (pool)");
ABSL_FLAG(int, test_size, ranksweep::Default().dataset.test_size, "dataset.test_size (pool)");
ABSL_FLAG(double, hard_share, ranksweep::Default().dataset.hard_share,
          "dataset.hard_share (pool)");
ABSL_FLAG(std::string, split, ranksweep::Name(ranksweep::Default().dataset.split),
          "dataset.split (pool): tokens | sequences");
ABSL_FLAG(std::string, head, ranksweep::Name(ranksweep::Default().head.kind), "head.kind");
ABSL_FLAG(std::string, feature_map, ranksweep::Name(ranksweep::Default().head.feature_map),
          "head.feature_map");
ABSL_FLAG(std::string, construction, ranksweep::Name(ranksweep::Default().head.construction),
          "head.construction");
ABSL_FLAG(std::vector<std::string>, hidden, ranksweep::Strings(ranksweep::Default().head.hidden),
          "head.hidden: comma-separated widths, 0..4 of them");
ABSL_FLAG(int, num_heads, ranksweep::Default().head.num_heads, "head.num_heads, 1..64");
ABSL_FLAG(int, value_dim, ranksweep::Default().head.value_dim, "head.value_dim; 0 = m");
ABSL_FLAG(int, score_dim, ranksweep::Default().head.score_dim, "head.score_dim; 0 = m");
ABSL_FLAG(double, relu_eps, ranksweep::Default().head.relu_eps, "head.relu_eps");
ABSL_FLAG(double, beta, ranksweep::Default().head.beta, "head.beta; 0 = automatic");
ABSL_FLAG(int, rank, ranksweep::Default().rank, "rank: feature rank r");
ABSL_FLAG(std::vector<std::string>, seeds, ranksweep::Strings(ranksweep::Default().seeds),
          "seeds: comma-separated, trained together");
ABSL_FLAG(double, lr, ranksweep::Default().train.lr, "train.lr");
ABSL_FLAG(double, beta1, ranksweep::Default().train.beta1, "train.beta1");
ABSL_FLAG(double, beta2, ranksweep::Default().train.beta2, "train.beta2");
ABSL_FLAG(double, weight_decay, ranksweep::Default().train.weight_decay, "train.weight_decay");
ABSL_FLAG(int, batch_size, ranksweep::Default().train.batch_size,
          "train.batch_size; 0 = full batch");
ABSL_FLAG(int, max_steps, ranksweep::Default().train.max_steps, "train.max_steps");
ABSL_FLAG(int, eval_every, ranksweep::Default().train.eval_every, "train.eval_every");
ABSL_FLAG(int, early_stop_evals, ranksweep::Default().train.early_stop_evals,
          "train.early_stop_evals; 0 = never stop early");
ABSL_FLAG(std::string, loss, ranksweep::Name(ranksweep::Default().train.loss), "train.loss");
ABSL_FLAG(std::string, schedule, ranksweep::Name(ranksweep::Default().train.schedule),
          "train.schedule");
ABSL_FLAG(int, warmup_steps, ranksweep::Default().train.warmup_steps,
          "train.warmup_steps, 0..max_steps");

namespace ranksweep {
namespace {

constexpr char kProgram[] = "ranksweep-train";
constexpr char kOwnFile[] = "worker/trainer/train_main.cc";

// The ranges a flag's value must be in before it reaches the spec; what
// depends on other fields (code_weight <= m, warmup_steps <= max_steps, ...)
// ValidateTaskSpec checks with the field's name.
std::vector<FlagRange> Ranges() {
  using L = SpecLimits;
  const double kMaxSeed = 9007199254740991.0;  // 2^53 - 1: exact in JSON
  return {
      {"max_seeds", 1, 1024},
      {"slots", 1, 64},
      {"indent", -1, 16},
      {"m", 1, L::kMaxM},
      {"seq_len", 1, L::kMaxSeqLen},
      {"code_weight", 1, L::kMaxM},
      {"max_overlap", 0, L::kMaxM},
      {"num_queries", 0, 1 << 20},
      {"weight", 0, L::kMaxM},
      {"bernoulli_p", 0, 1},
      {"test_pool_share", 0, 1},
      {"train_size", 0, L::kMaxDatasetSequences},
      {"test_size", 0, L::kMaxDatasetSequences},
      {"hard_share", 0, 1},
      {"hidden", 1, L::kMaxWidth},
      {"num_heads", 1, L::kMaxNumHeads},
      {"value_dim", 0, L::kMaxWidth},
      {"score_dim", 0, L::kMaxWidth},
      {"relu_eps", 0, 1},
      {"beta", 0, 1000},
      {"rank", 0, L::kMaxRank},
      {"seeds", 0, kMaxSeed},
      {"lr", 0, 10},
      {"beta1", 0, 1},
      {"beta2", 0, 1},
      {"weight_decay", 0, 1},
      {"batch_size", 0, L::kMaxDatasetSequences},
      {"max_steps", 0, L::kMaxSteps},
      {"eval_every", 1, L::kMaxSteps},
      {"early_stop_evals", 0, 1000},
      {"warmup_steps", 0, L::kMaxSteps},
  };
}

// An enum parser's error ("--head must be one of kernel, softmax, ...; got
// \"kernl\"") with the nearest name, as the CLI says it (client/hints.h).
absl::Status WithEnumSuggestion(const absl::Status& status) {
  static const std::regex kEnumError("must be one of ([^;]+); got \"([^\"]*)\"$");
  const std::string message(status.message());
  std::smatch m;
  if (!std::regex_search(message, m, kEnumError)) return status;
  const std::vector<std::string> choices = absl::StrSplit(m[1].str(), ", ");
  return absl::InvalidArgumentError(message + DidYouMeanSuffix(m[2].str(), choices));
}

// `t` with each task flag in `given` set from its flag (the others keep
// their value from --spec or the defaults). The ranges were checked
// before parsing; enum names are checked here, under the flag's name.
absl::Status ApplyTaskFlags(const std::set<std::string>& given, TaskSpec& t) {
  auto has = [&given](const char* name) { return given.count(name) > 0; };
#define RS_SET(name, field) \
  if (has(#name)) t.field = absl::GetFlag(FLAGS_##name)
#define RS_ENUM(name, field, parser)                                                  \
  if (has(#name)) {                                                                   \
    auto parsed = parser(absl::GetFlag(FLAGS_##name), "--" + DashFlagName(#name));    \
    if (!parsed.ok()) return WithEnumSuggestion(parsed.status());                     \
    t.field = *parsed;                                                                \
  }
  RS_ENUM(dataset, dataset.kind, ParseDatasetKind);
  RS_SET(m, dataset.m);
  RS_SET(seq_len, dataset.seq_len);
  RS_SET(final_query_only, dataset.final_query_only);
  RS_SET(data_seed, dataset.data_seed);
  RS_SET(code_weight, dataset.code_weight);
  RS_SET(max_overlap, dataset.max_overlap);
  RS_SET(num_queries, dataset.num_queries);
  RS_SET(weight, dataset.weight);
  RS_SET(bernoulli_p, dataset.bernoulli_p);
  RS_SET(pool_size, dataset.pool_size);
  RS_SET(test_pool_share, dataset.test_pool_share);
  RS_SET(train_size, dataset.train_size);
  RS_SET(test_size, dataset.test_size);
  RS_SET(hard_share, dataset.hard_share);
  RS_ENUM(split, dataset.split, ParsePoolSplit);
  RS_ENUM(head, head.kind, ParseHeadKind);
  RS_ENUM(feature_map, head.feature_map, ParseFeatureMap);
  RS_ENUM(construction, head.construction, ParseConstruction);
  RS_SET(num_heads, head.num_heads);
  RS_SET(value_dim, head.value_dim);
  RS_SET(score_dim, head.score_dim);
  RS_SET(relu_eps, head.relu_eps);
  RS_SET(beta, head.beta);
  RS_SET(rank, rank);
  RS_SET(lr, train.lr);
  RS_SET(beta1, train.beta1);
  RS_SET(beta2, train.beta2);
  RS_SET(weight_decay, train.weight_decay);
  RS_SET(batch_size, train.batch_size);
  RS_SET(max_steps, train.max_steps);
  RS_SET(eval_every, train.eval_every);
  RS_SET(early_stop_evals, train.early_stop_evals);
  RS_ENUM(loss, train.loss, ParseLossKind);
  RS_ENUM(schedule, train.schedule, ParseLrSchedule);
  RS_SET(warmup_steps, train.warmup_steps);
#undef RS_SET
#undef RS_ENUM
  // The lists' items were checked as integers in range before parsing.
  if (has("hidden")) {
    t.head.hidden.clear();
    for (const std::string& w : absl::GetFlag(FLAGS_hidden)) {
      int v = 0;
      if (!w.empty() && absl::SimpleAtoi(w, &v)) t.head.hidden.push_back(v);
    }
  }
  if (has("seeds")) {
    t.seeds.clear();
    for (const std::string& s : absl::GetFlag(FLAGS_seeds)) {
      uint64_t v = 0;
      if (!s.empty() && absl::SimpleAtoi(s, &v)) t.seeds.push_back(v);
    }
  }
  return absl::OkStatus();
}

absl::Status ReadFile(const std::string& flag, const std::string& path, std::string* out) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("--", DashFlagName(flag), ": cannot open ", path));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return absl::OkStatus();
}

// One split as {"size": B, "tokens": [[t_1..t_N], ...], "targets": [...]},
// tokens packed as integers (bit k = coordinate k).
std::string SplitToJson(const trainer::Split& split, int seq_len) {
  std::string out = absl::StrCat("{\"size\":", split.size, ",\"tokens\":[");
  for (int pass = 0; pass < 2; ++pass) {
    if (pass == 1) out += "],\"targets\":[";
    for (int64_t b = 0; b < split.size; ++b) {
      out += b == 0 ? "[" : ",[";
      for (int i = 0; i < seq_len; ++i) {
        const int64_t k = b * seq_len + i;
        if (i > 0) out += ",";
        if (pass == 0) {
          absl::StrAppend(&out, split.tokens[k]);
        } else {
          absl::StrAppend(&out, split.targets[k]);
        }
      }
      out += "]";
    }
  }
  return out + "]}";
}

// Writes the dataset of `spec` to `path` as JSON, for reference
// implementations outside this project (bench/train_reference.py).
absl::Status DumpDataset(const TaskSpec& spec, const std::string& path) {
  ASSIGN_OR_RETURN(const trainer::Dataset data, trainer::BuildDataset(spec.dataset));
  std::ofstream out(path);
  if (!out) return absl::NotFoundError(absl::StrCat("--dump-dataset: cannot write ", path));
  out << "{\"m\":" << data.m << ",\"seq_len\":" << data.seq_len
      << ",\"final_query_only\":" << (data.final_query_only ? "true" : "false")
      << ",\"train\":" << SplitToJson(data.train, data.seq_len)
      << ",\"test\":" << SplitToJson(data.test, data.seq_len) << "}\n";
  if (!out) return absl::InternalError(absl::StrCat("--dump-dataset: write failed: ", path));
  return absl::OkStatus();
}

int CountExact(const std::vector<SeedResult>& seeds, bool test) {
  int n = 0;
  for (const SeedResult& r : seeds) {
    const SplitMetrics& m = test ? r.test : r.train;
    if (m.sequences > 0 && m.error == 0) ++n;
  }
  return n;
}

// --sweep: trainer::RunSweep with a line per task and one for the whole run.
absl::Status RunSweepFile() {
  const std::string path = absl::GetFlag(FLAGS_sweep);
  const std::string device = absl::GetFlag(FLAGS_device);
  trainer::SweepRunOptions how;
  how.max_seeds = absl::GetFlag(FLAGS_max_seeds);
  how.slots = absl::GetFlag(FLAGS_slots);
  std::string text;
  RETURN_IF_ERROR(ReadFile("sweep", path, &text));
  ASSIGN_OR_RETURN(const SweepSpec sweep, SweepSpecFromJson(text));
  trainer::RunOptions run;
  run.device = device;
  int64_t tasks = 0, cells = 0;
  double task_seconds = 0;
  std::string device_name;
  const auto start = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(trainer::RunSweep(sweep, how, run, [&](const trainer::SweepTaskReport& r) {
    ++tasks;
    cells += static_cast<int64_t>(r.result.seeds.size());
    task_seconds += r.seconds;
    if (!r.result.seeds.empty()) device_name = r.result.seeds[0].device;
    std::cout << absl::StrFormat(
                     "{\"task\":%d,\"head\":\"%s\",\"rank\":%d,\"recipe\":\"%s\","
                     "\"seeds\":%d,\"train_exact\":%d,\"test_exact\":%d,\"seconds\":%.3f,"
                     "\"device\":\"%s\"}",
                     r.index, r.head, r.rank, RecipeLabel(sweep, r.recipe), r.result.seeds.size(),
                     CountExact(r.result.seeds, false), CountExact(r.result.seeds, true),
                     r.seconds, device_name)
              << std::endl;
  }));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << absl::StrFormat(
                   "{\"sweep\":\"%s\",\"tasks\":%d,\"cells\":%d,\"slots\":%d,"
                   "\"seconds\":%.3f,\"task_seconds\":%.3f,\"device\":\"%s\"}",
                   sweep.name, tasks, cells, how.slots, seconds, task_seconds, device_name)
            << std::endl;
  return absl::OkStatus();
}

std::string FactsToJson(const DatasetFacts& f) {
  return absl::StrCat("{\"train_sequences\":", f.train_sequences,
                      ",\"test_sequences\":", f.test_sequences,
                      ",\"distinct_queries\":", f.distinct_queries,
                      ",\"rank_lower_bound\":", f.rank_lower_bound,
                      ",\"rank_upper_bound\":", f.rank_upper_bound, "}");
}

absl::Status Main(const std::set<std::string>& given) {
  if (given.count("sweep") > 0) {
    std::vector<std::string> other;
    for (const std::string& name : given) {
      if (name != "sweep" && name != "device" && name != "max_seeds" && name != "slots") {
        other.push_back("--" + DashFlagName(name));
      }
    }
    if (!other.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          absl::StrJoin(other, ", "),
          " does not apply with --sweep (only --device, --max-seeds and --slots do); edit the "
          "sweep file instead"));
    }
    return RunSweepFile();
  }
  for (const char* sweep_only : {"max_seeds", "slots"}) {
    if (given.count(sweep_only) > 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", DashFlagName(sweep_only), " applies only with --sweep"));
    }
  }
  TaskSpec spec;
  if (const std::string path = absl::GetFlag(FLAGS_spec); !path.empty()) {
    std::string text;
    RETURN_IF_ERROR(ReadFile("spec", path, &text));
    ASSIGN_OR_RETURN(spec, TaskSpecFromJson(text));
  }
  RETURN_IF_ERROR(ApplyTaskFlags(given, spec));
  if (const std::string dump_path = absl::GetFlag(FLAGS_dump_dataset); !dump_path.empty()) {
    RETURN_IF_ERROR(ValidateTaskSpec(spec));
    return DumpDataset(spec, dump_path);
  }
  trainer::RunOptions run;
  run.device = absl::GetFlag(FLAGS_device);
  ASSIGN_OR_RETURN(trainer::TaskResult result, trainer::RunTask(spec, run));
  std::string seeds = SeedResultsToJson(result.seeds, absl::GetFlag(FLAGS_indent));
  std::cout << "{\"facts\":" << FactsToJson(result.facts) << ",\"seeds\":" << seeds << "}\n";
  return absl::OkStatus();
}

}  // namespace
}  // namespace ranksweep

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "runs one task locally and prints its per-seed results as JSON.\n"
      "Usage: ranksweep-train [--spec=task.json] [--TASK-FLAG=VALUE ...] [--device=D]\n"
      "       ranksweep-train ... --dump-dataset=FILE   (writes the dataset, trains nothing)\n"
      "       ranksweep-train --sweep=sweep.json [--device=D] [--max-seeds=N] [--slots=K]\n"
      "       ranksweep-train --version   (the version, the build id, LibTorch and CUDA)\n"
      "Every task flag is a TaskSpec field by its JSON name, dashed (--seq-len for "
      "dataset.seq_len).");
  // --help lists this file's flags; --version prints what every ranksweep
  // binary prints.
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [](absl::string_view file) {
    return absl::EndsWith(file, ranksweep::kOwnFile);
  };
  usage.version_string = [] {
    const ranksweep::trainer::BuildInfo build = ranksweep::trainer::GetBuildInfo();
    const absl::StatusOr<std::string> cuda = ranksweep::trainer::ResolveDeviceName("cuda");
    return ranksweep::VersionText(
        "ranksweep-train", RANKSWEEP_BUILD_ID,
        ranksweep::TorchVersionLine(build.torch_version, build.cuda_version,
                                    cuda.ok() ? *cuda : ""));
  };
  absl::SetFlagsUsageConfig(usage);
  // -h, which ranksweep-train has always taken, is --help.
  std::vector<std::string> args(argv, argv + argc);
  for (size_t i = 1; i < args.size() && args[i] != "--"; ++i) {
    if (args[i] == "-h") args[i] = "--help";
  }
  std::vector<char*> args_argv = ranksweep::ArgvOf(args);
  const int n = static_cast<int>(args.size());
  if (std::optional<int> code =
          ranksweep::ParseFlagsOnly(n, args_argv.data(), ranksweep::kProgram,
                                    ranksweep::kOwnFile, ranksweep::Ranges(), std::cout, std::cerr)) {
    return *code;
  }
  const absl::Status status = ranksweep::Main(ranksweep::GivenFlags(n, args_argv.data()));
  if (!status.ok()) {
    std::cerr << "ranksweep-train: " << status.message() << "\n";
    return status.code() == absl::StatusCode::kInvalidArgument ? ranksweep::kExitUsage
                                                                : ranksweep::kExitFailure;
  }
  return 0;
}
