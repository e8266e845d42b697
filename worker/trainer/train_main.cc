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
// Flags override the fields of --spec (or of the TaskSpec defaults); run with
// --help for the list. Needs no gRPC: only the trainer library and Abseil.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/did_you_mean.h"
#include "common/exit_codes.h"
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

template <typename T>
absl::Status ParseNumber(const std::string& flag, const std::string& v, T* out) {
  bool ok;
  if constexpr (std::is_same_v<T, double>) {
    ok = absl::SimpleAtod(v, out);
  } else if constexpr (std::is_same_v<T, bool>) {
    ok = absl::SimpleAtob(v, out);
  } else {
    ok = absl::SimpleAtoi(v, out);
  }
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("--", DashFlagName(flag), ": cannot parse \"", v, "\""));
}

template <typename T>
absl::Status ParseList(const std::string& flag, const std::string& v, std::vector<T>* out) {
  out->clear();
  if (v.empty()) return absl::OkStatus();
  const std::vector<std::string> parts = absl::StrSplit(v, ',');
  for (const std::string& part : parts) {
    T x;
    RETURN_IF_ERROR(ParseNumber(flag, part, &x));
    out->push_back(x);
  }
  return absl::OkStatus();
}

using Setter = std::function<absl::Status(const std::string&)>;

std::map<std::string, Setter> MakeSetters(TaskSpec& t, trainer::RunOptions& run, int& indent) {
  std::map<std::string, Setter> s;
#define RS_NUM(name, field) \
  s[name] = [&t](const std::string& v) { return ParseNumber(name, v, &t.field); }
#define RS_ENUM(name, field, parser)                               \
  s[name] = [&t](const std::string& v) -> absl::Status {           \
    ASSIGN_OR_RETURN(t.field, parser(v, DashFlagName("--" name))); \
    return absl::OkStatus();                                       \
  }
  RS_ENUM("dataset", dataset.kind, ParseDatasetKind);
  RS_NUM("m", dataset.m);
  RS_NUM("seq_len", dataset.seq_len);
  RS_NUM("final_query_only", dataset.final_query_only);
  RS_NUM("data_seed", dataset.data_seed);
  RS_NUM("code_weight", dataset.code_weight);
  RS_NUM("max_overlap", dataset.max_overlap);
  RS_NUM("num_queries", dataset.num_queries);
  RS_NUM("weight", dataset.weight);
  RS_NUM("bernoulli_p", dataset.bernoulli_p);
  RS_NUM("pool_size", dataset.pool_size);
  RS_NUM("test_pool_share", dataset.test_pool_share);
  RS_NUM("train_size", dataset.train_size);
  RS_NUM("test_size", dataset.test_size);
  RS_NUM("hard_share", dataset.hard_share);
  RS_ENUM("split", dataset.split, ParsePoolSplit);
  RS_ENUM("head", head.kind, ParseHeadKind);
  RS_ENUM("feature_map", head.feature_map, ParseFeatureMap);
  RS_ENUM("construction", head.construction, ParseConstruction);
  s["hidden"] = [&t](const std::string& v) { return ParseList("hidden", v, &t.head.hidden); };
  RS_NUM("num_heads", head.num_heads);
  RS_NUM("value_dim", head.value_dim);
  RS_NUM("score_dim", head.score_dim);
  RS_NUM("relu_eps", head.relu_eps);
  RS_NUM("beta", head.beta);
  RS_NUM("rank", rank);
  s["seeds"] = [&t](const std::string& v) { return ParseList("seeds", v, &t.seeds); };
  RS_NUM("lr", train.lr);
  RS_NUM("beta1", train.beta1);
  RS_NUM("beta2", train.beta2);
  RS_NUM("weight_decay", train.weight_decay);
  RS_NUM("batch_size", train.batch_size);
  RS_NUM("max_steps", train.max_steps);
  RS_NUM("eval_every", train.eval_every);
  RS_NUM("early_stop_evals", train.early_stop_evals);
  RS_ENUM("loss", train.loss, ParseLossKind);
  RS_ENUM("schedule", train.schedule, ParseLrSchedule);
  RS_NUM("warmup_steps", train.warmup_steps);
  s["device"] = [&run](const std::string& v) {
    run.device = v;
    return absl::OkStatus();
  };
  s["indent"] = [&indent](const std::string& v) { return ParseNumber("indent", v, &indent); };
#undef RS_NUM
#undef RS_ENUM
  return s;
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
absl::Status RunSweepFile(const std::vector<std::pair<std::string, std::string>>& flags) {
  std::string path, device = "auto";
  trainer::SweepRunOptions how;
  for (const auto& [name, value] : flags) {
    if (name == "sweep") {
      path = value;
    } else if (name == "device") {
      device = value;
    } else if (name == "max_seeds") {
      RETURN_IF_ERROR(ParseNumber("max_seeds", value, &how.max_seeds));
    } else if (name == "slots") {
      RETURN_IF_ERROR(ParseNumber("slots", value, &how.slots));
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", DashFlagName(name),
          " does not apply with --sweep (only --device, --max-seeds and --slots do); edit the "
          "sweep file instead"));
    }
  }
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

absl::Status Main(int argc, char** argv) {
  // Split "--flag=value" and "--flag value" into (flag, value) pairs.
  std::vector<std::pair<std::string, std::string>> flags;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--version") {
      const trainer::BuildInfo build = trainer::GetBuildInfo();
      const absl::StatusOr<std::string> cuda = trainer::ResolveDeviceName("cuda");
      std::cout << VersionText("ranksweep-train", RANKSWEEP_BUILD_ID,
                               TorchVersionLine(build.torch_version, build.cuda_version,
                                                cuda.ok() ? *cuda : ""));
      return absl::OkStatus();
    }
    if (arg == "--help" || arg == "-h") {
      std::cout << "usage: ranksweep-train [--spec task.json] [--FIELD VALUE ...]\n"
                   "FIELD: any TaskSpec field by its JSON name with dashes, e.g. dataset m "
                   "seq-len final-query-only data-seed code-weight max-overlap num-queries "
                   "weight bernoulli-p pool-size test-pool-share train-size test-size "
                   "hard-share split head feature-map construction hidden num-heads value-dim "
                   "score-dim relu-eps beta rank seeds lr beta1 beta2 weight-decay batch-size "
                   "max-steps eval-every early-stop-evals loss schedule warmup-steps; plus device "
                   "(auto|cpu|cuda|cuda:N), indent (JSON indent, -1 = compact) and "
                   "dump-dataset FILE (write the dataset as JSON to FILE instead of "
                   "training).\n"
                   "       ranksweep-train --sweep sweep.json [--device D] [--max-seeds N] "
                   "[--slots K]\n"
                   "  trains every task of a grid sweep (JSON, as `ranksweep submit --dry-run` "
                   "prints it), N seeds fused per task (default 64, 1..1024), K tasks at once "
                   "(default 1, 1..64, as a worker's --slots), and prints a JSON line per task "
                   "as it finishes and one for the whole sweep (its wall time).\n"
                   "       ranksweep-train --version\n"
                   "  prints the version, the build id, the LibTorch version and whether CUDA "
                   "is available.\n"
                   "Every flag may also be written with underscores instead of dashes "
                   "(--max_steps), the older spelling, until the next release.\n";
      return absl::OkStatus();
    }
    if (arg.rfind("--", 0) != 0) {
      return absl::InvalidArgumentError(absl::StrCat("unexpected argument \"", arg, "\""));
    }
    arg = arg.substr(2);
    const size_t eq = arg.find('=');
    // --max-steps and --max_steps alike (common/flag_names.h).
    if (eq != std::string::npos) {
      flags.emplace_back(UnderscoreFlagName(arg.substr(0, eq)), arg.substr(eq + 1));
    } else if (i + 1 < argc) {
      flags.emplace_back(UnderscoreFlagName(arg), argv[++i]);
    } else {
      return absl::InvalidArgumentError(absl::StrCat("--", arg, " needs a value"));
    }
  }
  for (const auto& flag : flags) {
    if (flag.first == "sweep") return RunSweepFile(flags);
  }
  TaskSpec spec;
  trainer::RunOptions run;
  int indent = 2;
  std::string dump_path;
  for (const auto& [name, value] : flags) {
    if (name != "spec") continue;
    std::string text;
    RETURN_IF_ERROR(ReadFile("spec", value, &text));
    ASSIGN_OR_RETURN(spec, TaskSpecFromJson(text));
  }
  const std::map<std::string, Setter> setters = MakeSetters(spec, run, indent);
  for (const auto& [name, value] : flags) {
    if (name == "spec") continue;
    if (name == "dump_dataset") {
      dump_path = value;
      continue;
    }
    auto it = setters.find(name);
    if (it == setters.end()) {
      std::vector<std::string> known;
      for (const auto& [setter, unused] : setters) known.push_back("--" + DashFlagName(setter));
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag --", DashFlagName(name),
                       DidYouMeanSuffix("--" + DashFlagName(name), known), " (see --help)"));
    }
    RETURN_IF_ERROR(it->second(value));
  }
  if (!dump_path.empty()) {
    RETURN_IF_ERROR(ValidateTaskSpec(spec));
    return DumpDataset(spec, dump_path);
  }
  ASSIGN_OR_RETURN(trainer::TaskResult result, trainer::RunTask(spec, run));
  std::string seeds = SeedResultsToJson(result.seeds, indent);
  std::cout << "{\"facts\":" << FactsToJson(result.facts) << ",\"seeds\":" << seeds << "}\n";
  return absl::OkStatus();
}

}  // namespace
}  // namespace ranksweep

int main(int argc, char** argv) {
  const absl::Status status = ranksweep::Main(argc, argv);
  if (!status.ok()) {
    std::cerr << "ranksweep-train: " << status << "\n";
    return status.code() == absl::StatusCode::kInvalidArgument ? ranksweep::kExitUsage
                                                                : ranksweep::kExitFailure;
  }
  return 0;
}
