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
// Flags are parsed as every ranksweep binary parses them (common/flags.h):
// dashes or underscores, "did you mean" for an unknown flag, a bad value
// refused with its range. The flags given override the fields of --spec (or
// of the TaskSpec defaults). Needs no gRPC: only the trainer library,
// Abseil and CLI11.
//
// Exit codes (common/exit_codes.h): 0 done; 1 bad flags or an invalid spec;
// 5 any other failure (a file that cannot be read, a training that failed).
#include <chrono>
#include <cstdio>
#include <deque>
#include <functional>
#include <optional>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/did_you_mean.h"
#include "common/exit_codes.h"
#include "common/flags.h"
#include "common/spec/spec.h"
#include "common/spec/spec_fields.h"
#include "common/spec/spec_json.h"
#include "common/status_macros.h"
#include "common/version.h"
#include "ranksweep_build_id.h"  // RANKSWEEP_BUILD_ID (cmake/BuildId.cmake)
#include "worker/trainer/dataset.h"
#include "worker/trainer/trainer.h"

namespace ranksweep {
namespace {

constexpr char kProgram[] = "ranksweep-train";

// What to run and how; the task itself is set by the task flags.
struct RunFlags {
  std::string spec;
  std::string sweep;
  int max_seeds = 64;
  int slots = 1;
  std::string device = "auto";
  std::string dump_dataset;
  int indent = 2;
};

void AddRunFlags(Flags& flags, RunFlags& f) {
  flags.Add("spec", &f.spec,
            "Task spec JSON file; the task flags below override its fields. Empty = the "
            "TaskSpec defaults");
  flags.Add("sweep", &f.sweep,
            "Grid sweep JSON file (as `ranksweep submit --dry-run` prints it): train every "
            "task, --slots at once, printing a JSON line per task as it finishes and one for "
            "the whole sweep. Only --device, --max-seeds and --slots apply with it");
  flags.Add("max-seeds", &f.max_seeds, "With --sweep: seeds fused per task, 1..1024", 1, 1024);
  flags.Add("slots", &f.slots, "With --sweep: tasks trained at once, 1..64 (as a worker's --slots)",
            1, 64);
  flags.Add("device", &f.device, "auto | cpu | cuda | cuda:N (auto: CUDA when present)");
  flags.Add("dump-dataset", &f.dump_dataset,
            "Write the task's dataset as JSON to this file instead of training");
  flags.Add("indent", &f.indent, "JSON indent of the results, -1..16; -1 = compact", -1, 16);
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

template <typename T>
std::vector<std::string> Strings(const std::vector<T>& values) {
  std::vector<std::string> out;
  for (const T& v : values) out.push_back(absl::StrCat(v));
  return out;
}

// The task flags: one per TaskSpec field, made from the rows of the
// dataset's, the head's and the training's fields (common/spec/spec_fields.h)
// with their help and bounds, plus --rank and --seeds. Each holds its value
// here (starting at the TaskSpec default, which --help shows) until Apply
// copies the given ones onto the spec to run.
class TaskFlags {
 public:
  explicit TaskFlags(Flags& flags);
  // `t` with each task flag argv gave set from its flag; the others keep
  // their value from --spec or the defaults. Ranges were checked while
  // parsing; enum names are checked here, under the flag's name.
  absl::Status Apply(const Flags& flags, TaskSpec& t) const;

 private:
  // The flags of one struct's rows; `part` picks the struct out of a
  // TaskSpec and `part_name` is its JSON name ("dataset").
  template <typename S>
  void AddRows(Flags& flags, absl::Span<const SpecField<S>> rows, S& (*part)(TaskSpec&),
               const char* part_name);
  // A flag of one field: `field` picks it out of a TaskSpec.
  template <typename T, typename... Range>
  void Add(Flags& flags, const std::string& name, T& (*field)(TaskSpec&), const std::string& help,
           Range... range) {
    flags.Add(name, &field(values_), help, range...);
    setters_.push_back({name, [this, field](TaskSpec& t) {
                          field(t) = field(values_);
                          return absl::OkStatus();
                        }});
  }
  // A comma-separated list of integers in [min, max]: `field` picks it out
  // of a TaskSpec.
  template <typename T>
  void AddList(Flags& flags, const std::string& name,
               std::function<std::vector<T>&(TaskSpec&)> field, int64_t min, int64_t max,
               const std::string& help) {
    std::vector<std::string>& items = lists_.emplace_back(Strings(field(values_)));
    flags.AddIntegerList(name, &items, help, min, max);
    setters_.push_back({name, [&items, field](TaskSpec& t) {
                          field(t).clear();
                          for (const std::string& item : items) {
                            T v{};
                            if (absl::SimpleAtoi(item, &v)) field(t).push_back(v);
                          }
                          return absl::OkStatus();
                        }});
  }

  struct Setter {
    std::string name;
    std::function<absl::Status(TaskSpec&)> set;
  };
  TaskSpec values_;                            // the field flags' values
  std::deque<std::string> texts_;              // the enum flags' (stable addresses)
  std::deque<std::vector<std::string>> lists_;  // the list flags'
  std::vector<Setter> setters_;
};

template <typename S>
void TaskFlags::AddRows(Flags& flags, absl::Span<const SpecField<S>> rows,
                        S& (*part)(TaskSpec&), const char* part_name) {
  for (const SpecField<S>& row : rows) {
    const std::string name = FieldFlag(row);
    const std::string help = FieldHelp(row, part_name);
    const FieldBounds b = row.bounds;
    std::visit(
        [&](const auto& member) {
          using M = std::decay_t<decltype(member)>;
          if constexpr (std::is_same_v<M, EnumMember<S>>) {
            const EnumMember<S>& e = member;
            std::string& text = texts_.emplace_back(e.names.at(e.get(part(values_))));
            flags.Add(name, &text, help);
            setters_.push_back({name, [&text, e, part, name](TaskSpec& t) -> absl::Status {
                                  absl::StatusOr<int> v = e.parse(text, "--" + name);
                                  if (!v.ok()) return WithEnumSuggestion(v.status());
                                  e.set(*v, &part(t));
                                  return absl::OkStatus();
                                }});
          } else if constexpr (std::is_same_v<M, std::vector<int> S::*>) {
            AddList<int>(
                flags, name, [part, member](TaskSpec& t) -> std::vector<int>& { return part(t).*member; },
                static_cast<int64_t>(b.min), static_cast<int64_t>(b.max), help);
          } else {
            auto& value = part(values_).*member;
            if constexpr (std::is_same_v<M, bool S::*>) {
              flags.Add(name, &value, help);
            } else if (b.bounded()) {
              using V = std::decay_t<decltype(value)>;
              using Bound = std::conditional_t<std::is_floating_point_v<V>, double, int64_t>;
              flags.Add(name, &value, help, static_cast<Bound>(b.min), static_cast<Bound>(b.max));
            } else {
              flags.Add(name, &value, help);
            }
            setters_.push_back({name, [this, part, member](TaskSpec& t) {
                                  part(t).*member = part(values_).*member;
                                  return absl::OkStatus();
                                }});
          }
        },
        row.member);
  }
}

TaskFlags::TaskFlags(Flags& flags) {
  using L = SpecLimits;
  AddRows<DatasetSpec>(flags, DatasetFields(), [](TaskSpec& t) -> DatasetSpec& { return t.dataset; },
                       "dataset");
  AddRows<HeadSpec>(flags, HeadFields(), [](TaskSpec& t) -> HeadSpec& { return t.head; }, "head");
  Add<int>(flags, "rank", [](TaskSpec& t) -> int& { return t.rank; }, "rank: feature rank r", 0,
           L::kMaxRank);
  // 2^53 - 1: a seed stays exact in JSON.
  AddList<uint64_t>(flags, "seeds", [](TaskSpec& t) -> std::vector<uint64_t>& { return t.seeds; },
                    0, int64_t{9007199254740991}, "seeds: comma-separated, trained together");
  AddRows<TrainSpec>(flags, TrainFields(), [](TaskSpec& t) -> TrainSpec& { return t.train; },
                     "train");
}

absl::Status TaskFlags::Apply(const Flags& flags, TaskSpec& t) const {
  for (const Setter& s : setters_) {
    if (flags.Given(s.name)) RETURN_IF_ERROR(s.set(t));
  }
  return absl::OkStatus();
}

absl::Status ReadFile(const std::string& flag, const std::string& path, std::string* out) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("--", flag, ": cannot open ", path));
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
absl::Status RunSweepFile(const RunFlags& f) {
  const std::string& path = f.sweep;
  const std::string& device = f.device;
  trainer::SweepRunOptions how;
  how.max_seeds = f.max_seeds;
  how.slots = f.slots;
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

absl::Status Main(const Flags& flags, const RunFlags& f, const TaskFlags& task_flags) {
  if (flags.Given("sweep")) {
    std::vector<std::string> other;
    for (const std::string& name : flags.GivenNames()) {
      if (name != "sweep" && name != "device" && name != "max-seeds" && name != "slots") {
        other.push_back("--" + name);
      }
    }
    if (!other.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          absl::StrJoin(other, ", "),
          " does not apply with --sweep (only --device, --max-seeds and --slots do); edit the "
          "sweep file instead"));
    }
    return RunSweepFile(f);
  }
  for (const char* sweep_only : {"max-seeds", "slots"}) {
    if (flags.Given(sweep_only)) {
      return absl::InvalidArgumentError(absl::StrCat("--", sweep_only, " applies only with --sweep"));
    }
  }
  TaskSpec spec;
  if (!f.spec.empty()) {
    std::string text;
    RETURN_IF_ERROR(ReadFile("spec", f.spec, &text));
    ASSIGN_OR_RETURN(spec, TaskSpecFromJson(text));
  }
  RETURN_IF_ERROR(task_flags.Apply(flags, spec));
  if (!f.dump_dataset.empty()) {
    RETURN_IF_ERROR(ValidateTaskSpec(spec));
    return DumpDataset(spec, f.dump_dataset);
  }
  trainer::RunOptions run;
  run.device = f.device;
  ASSIGN_OR_RETURN(trainer::TaskResult result, trainer::RunTask(spec, run));
  std::string seeds = SeedResultsToJson(result.seeds, f.indent);
  std::cout << "{\"facts\":" << FactsToJson(result.facts) << ",\"seeds\":" << seeds << "}\n";
  return absl::OkStatus();
}

}  // namespace
}  // namespace ranksweep

int main(int argc, char** argv) {
  ranksweep::Flags flags(
      ranksweep::kProgram,
      "ranksweep-train: runs one task locally and prints its per-seed results as JSON.\n"
      "Usage: ranksweep-train [--spec=task.json] [--TASK-FLAG=VALUE ...] [--device=D]\n"
      "       ranksweep-train ... --dump-dataset=FILE   (writes the dataset, trains nothing)\n"
      "       ranksweep-train --sweep=sweep.json [--device=D] [--max-seeds=N] [--slots=K]\n"
      "       ranksweep-train --version   (the version, the build id, LibTorch and CUDA)\n"
      "Every task flag is a TaskSpec field by its JSON name, dashed (--seq-len for "
      "dataset.seq_len).",
      [] {  // --version only: it probes for CUDA
        const ranksweep::trainer::BuildInfo build = ranksweep::trainer::GetBuildInfo();
        const absl::StatusOr<std::string> cuda = ranksweep::trainer::ResolveDeviceName("cuda");
        return ranksweep::VersionText(
            "ranksweep-train", RANKSWEEP_BUILD_ID,
            ranksweep::TorchVersionLine(build.torch_version, build.cuda_version,
                                        cuda.ok() ? *cuda : ""));
      });
  ranksweep::RunFlags run_flags;
  ranksweep::AddRunFlags(flags, run_flags);
  const ranksweep::TaskFlags task_flags(flags);
  if (std::optional<int> exit = flags.Parse(argc, argv, std::cout, std::cerr)) return *exit;
  const absl::Status status = ranksweep::Main(flags, run_flags, task_flags);
  if (!status.ok()) {
    std::cerr << "ranksweep-train: " << status.message() << "\n";
    return status.code() == absl::StatusCode::kInvalidArgument ? ranksweep::kExitUsage
                                                                : ranksweep::kExitFailure;
  }
  return 0;
}
