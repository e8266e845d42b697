// `ranksweep submit` (with --dry-run and --watch) and `ranksweep presets`.
#include <algorithm>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/commands.h"
#include "client/format.h"
#include "client/hints.h"
#include "client/presets.h"
#include "client/spec_file.h"
#include "common/plural.h"
#include "common/spec/spec.h"
#include "common/spec/spec_fields.h"
#include "common/spec/spec_json.h"
#include "nlohmann/json.hpp"
#include "proto/convert.h"

namespace ranksweep::client {
namespace {

struct SubmitArgs {
  std::string file;
  std::string preset;
  double scale = 1.0;
  bool watch = false;
  double reconnect = kDefaultReconnectSeconds;
  bool dry_run = false;
  std::string name, mode;
  bool no_cache = false;
  bool one_recipe = false;
  int seed_count = 0, priority = 0;
  // The flags of the dataset's, the training's and the pruning's fields, by
  // the field's name (common/spec/spec_fields.h): the values as typed (a
  // recipe axis takes a comma-separated list, which sweeps it), or
  // true/false.
  std::map<std::string, std::vector<std::string>> fields;
  std::map<std::string, bool> switches;
  std::vector<std::string> heads;
  std::vector<int> ranks;
  std::vector<uint64_t> seed_list;
};

int Submit(Client* client, const SubmitArgs& a, CLI::App* sub) {
  // A preset may stand for several sweeps (e.g. one per sequence length);
  // everything below applies to each of them.
  std::vector<SweepSpec> specs(1);
  std::vector<std::string> resolution;
  if (!a.preset.empty()) {
    if (!a.file.empty()) {
      return ReportLocal(absl::InvalidArgumentError("--preset and -f cannot be used together"));
    }
    absl::StatusOr<ResolvedPreset> preset = ResolvePreset(a.preset, a.scale);
    if (absl::IsNotFound(preset.status())) {
      // A mistyped name is a usage error (exit 1), with the nearest name.
      return ReportLocal(absl::InvalidArgumentError(absl::StrCat(
          preset.status().message(), DidYouMeanSuffix(a.preset, PresetNames()))));
    }
    if (!preset.ok()) return ReportLocal(preset.status());
    specs = preset->sweeps;
    resolution = preset->resolution;
  } else if (sub->count("--scale") > 0) {
    return ReportLocal(absl::InvalidArgumentError("--scale needs --preset"));
  }
  SweepSpec& spec = specs[0];
  if (!a.file.empty()) {
    absl::StatusOr<SweepSpec> loaded = LoadSweepSpecFile(a.file);
    if (!loaded.ok()) {
      std::cerr << "ranksweep: " << WithEnumSuggestion(std::string(loaded.status().message()))
                << "\n";
      return kExitUsage;
    }
    spec = *std::move(loaded);
  }
  auto given = [&](const std::string& flag) { return sub->count(flag) > 0; };
  SpecOverrides o;
  if (given("--name")) o.name = a.name;
  if (given("--heads")) o.heads = a.heads;
  if (given("--ranks")) o.ranks = a.ranks;
  if (given("--seeds")) o.seed_count = a.seed_count;
  if (given("--seed-list")) o.seeds = a.seed_list;
  if (given("--priority")) o.priority = a.priority;
  auto field_given = [&](const auto& row) {
    if (!given("--" + FieldFlag(row))) return;
    if (a.switches.count(row.name) > 0) {
      o.fields.push_back({row.name, {a.switches.at(row.name) ? "true" : "false"}});
    } else {
      o.fields.push_back({row.name, a.fields.at(row.name)});
    }
  };
  for (const auto& row : DatasetFields()) field_given(row);
  for (const auto& row : TrainFields()) field_given(row);
  for (const auto& row : PruneFields()) field_given(row);
  std::optional<SweepMode> mode;
  if (given("--mode")) {
    absl::StatusOr<SweepMode> parsed = ParseSweepMode(a.mode, "--mode");
    if (!parsed.ok()) return ReportLocal(parsed.status());
    mode = *parsed;
  }
  std::vector<std::string> kept;  // what --one-recipe dropped, a line per sweep
  std::vector<std::string> notes;
  for (SweepSpec& one : specs) {
    if (absl::Status s = ApplyOverrides(o, &one); !s.ok()) return ReportLocal(s);
    if (mode.has_value()) one.mode = *mode;
    if (a.no_cache) one.reuse_results = false;
    // The server validates too; checking here gives the same message offline.
    if (absl::Status s = ValidateSweepSpec(one); !s.ok()) return ReportLocal(s);
    // After the axis flags, so `--lr 0.003,0.001 --one-recipe` keeps 0.003.
    if (a.one_recipe) {
      const std::string dropped = KeepFirstRecipe(&one);
      if (!dropped.empty()) {
        kept.push_back(
            absl::StrCat(one.name, ": ", dropped, "; ", CountOf(GridCellCount(one), "cell")));
      }
    }
    if (one.prune.rule != PruneRule::kNone && RecipeCount(one) < 2) {
      notes.push_back(absl::StrCat(one.name, ": prune ", Name(one.prune.rule),
                                   " has nothing to prune: the sweep has one recipe"));
    }
  }
  if (!resolution.empty()) {
    std::cerr << "preset " << a.preset << " at scale " << a.scale << ":\n";
    for (const std::string& line : resolution) std::cerr << "  " << line << "\n";
  }
  if (!kept.empty()) {
    std::cerr << "--one-recipe, the first value of each training axis:\n";
    for (const std::string& line : kept) std::cerr << "  " << line << "\n";
  }
  for (const std::string& line : notes) std::cerr << "note: " << line << "\n";
  for (const SweepSpec& one : specs) {
    const SweepCost cost = EstimateSweepCost(one);
    if (a.dry_run) {
      std::cerr << one.name << ": " << CountOf(GridCellCount(one), "cell");
      if (!one.axes.empty()) {
        std::cerr << " in " << RecipeCount(one) << " recipes; axes:";
        for (const SweepAxis& axis : one.axes) {
          std::cerr << " " << axis.name << " ";
          for (size_t i = 0; i < axis.values.size(); ++i) {
            std::cerr << (i == 0 ? "" : ",") << FormatAxisValue(axis.name, axis.values[i]);
          }
        }
      }
      if (one.mode == SweepMode::kSearch) std::cerr << " (the full grid; search trains fewer)";
      std::cerr << "\n";
      for (const std::string& line : SweepCostLines(cost)) {
        std::cerr << one.name << ": " << line << "\n";
      }
    }
    for (const std::string& w : SweepWarnings(one, cost)) {
      std::cerr << "warning: " << one.name << ": " << w << "\n";
    }
  }
  if (a.dry_run) {
    // Always one JSON value on stdout: the spec, or an array of them for a
    // preset of several sweeps.
    if (specs.size() == 1) {
      std::cout << SweepSpecToJson(specs[0], 2) << "\n";
    } else {
      nlohmann::ordered_json all = nlohmann::ordered_json::array();
      for (const SweepSpec& one : specs) {
        all.push_back(nlohmann::ordered_json::parse(SweepSpecToJson(one, -1)));
      }
      std::cout << all.dump(2) << "\n";
    }
    return kExitOk;
  }
  if (a.watch && specs.size() > 1) {
    return ReportLocal(absl::InvalidArgumentError(absl::StrCat(
        "--watch follows one sweep; preset ", a.preset, " submits ", specs.size())));
  }
  std::string last_id;
  for (const SweepSpec& one : specs) {
    v1::SubmitSweepRequest req;
    *req.mutable_spec() = ToProto(one);
    v1::SubmitSweepResponse resp;
    auto ctx = client->Context();
    grpc::Status status = client->stub().SubmitSweep(ctx.get(), req, &resp);
    if (!status.ok()) return Report(client->globals(), status, "submit");
    std::cout << resp.sweep_id() << "\n" << std::flush;
    std::cerr << "submitted " << one.name << ": " << CountOf(resp.cells(), "cell");
    if (resp.cached_cells() > 0) {
      std::cerr << " (" << resp.cached_cells() << " done from the result cache)";
    }
    if (one.mode == SweepMode::kSearch) std::cerr << " (search: more as ranks are probed)";
    std::cerr << "\n";
    last_id = resp.sweep_id();
  }
  if (a.watch) return Watch(*client, last_id, a.reconnect);
  return kExitOk;
}

}  // namespace

void AddSubmitCommand(CLI::App* app, Command* command) {
  // The flags' values, kept alive by the callbacks that read them.
  auto sa = std::make_shared<SubmitArgs>();
  CLI::App* submit = app->add_subcommand(
      "submit", "Submit a sweep; prints its id on stdout and the cell count on stderr");
  submit->footer(
      "Flags override the fields of the -f file. Heads: KIND[:PART]... with PART a feature map\n"
      "(elu1 relu_eps softplus exp favor), a construction (rank1 indicator softmax_exact), xN\n"
      "(num_heads) or h=W1/W2 (hidden widths), e.g. --heads kernel:elu1,softmax,"
      "multihead_kernel:elu1:x4\n\n" +
      std::string(kHelpFooter));
  submit->add_option("-f,--file", sa->file, "Spec file, YAML or JSON (spec.h field names; - = stdin)");
  submit->add_option("--preset", sa->preset,
                     "A named sweep (see `ranksweep presets`); may submit several sweeps, "
                     "one id per line");
  submit->add_option("--scale", sa->scale,
                     "Shrink the preset: 0 < S <= 1 (fewer ranks, seeds, steps, queries, pool "
                     "sizes; --dry-run shows what it resolved to)")
      ->capture_default_str();
  submit->add_option("--name", sa->name, "Sweep name, 1..128 of [A-Za-z0-9._-]");
  // A flag for each field of the dataset, the training and the pruning,
  // named and described by its row: a recipe axis' takes one value or a
  // comma-separated list (an axis); a true-or-false field's is a switch.
  auto field_option = [&](const auto& row, const char* part) {
    const std::string flag = "--" + FieldFlag(row);
    std::string help = FieldHelp(row, part);
    if (IsBoolField(row)) {
      submit->add_flag(flag, sa->switches[row.name], help);
      return;
    }
    if (IsAxisName(row.name)) help += "; a comma-separated list sweeps it (an axis)";
    submit->add_option(flag, sa->fields[row.name], help)
        ->delimiter(',')
        ->type_name(FieldTypeName(row));
  };
  for (const auto& row : DatasetFields()) field_option(row, "dataset");
  submit->add_option("--heads", sa->heads, "Comma-separated heads, e.g. kernel:elu1,softmax")
      ->delimiter(',');
  submit->add_option("--ranks", sa->ranks, "Comma-separated ranks, e.g. 1,2,4,8")->delimiter(',');
  submit->add_option("--seeds", sa->seed_count, "Number of seeds: 0..N-1");
  submit->add_option("--seed-list", sa->seed_list, "Explicit comma-separated seeds")
      ->delimiter(',');
  for (const auto& row : TrainFields()) field_option(row, "train");
  submit->add_option("--priority", sa->priority, "-100..100, higher runs first");
  submit->add_option("--mode", sa->mode,
                     "grid (every rank) | search (bisection for each head's transition rank)");
  submit->add_flag("--one-recipe", sa->one_recipe,
                   "Keep only each training axis' first value (e.g. an ood-tokens preset's lr "
                   "0.01), a fraction of the cells; dataset axes (the law's m) stay; axis flags "
                   "on the same line apply first");
  for (const auto& row : PruneFields()) field_option(row, "prune");
  submit->add_flag("--no-cache", sa->no_cache,
                   "Train every cell, even those already trained by this build");
  submit->add_flag("--watch", sa->watch, "Follow the sweep after submitting (as `watch`)");
  AddReconnectOption(submit, &sa->reconnect);
  submit->add_flag("--dry-run", sa->dry_run,
                   "Print the spec as JSON (an array for several sweeps) instead of submitting; "
                   "the cell count, the axes, the dataset's size and a memory estimate go to "
                   "stderr");
  submit->callback([command, sa, submit] {
    command->needs_addr = !sa->dry_run;
    command->action = [sa, submit](Client* c) { return Submit(c, *sa, submit); };
  });
}

void AddPresetsCommand(CLI::App* app, Command* command) {
  CLI::App* presets = app->add_subcommand(
      "presets", "List the named sweeps `submit --preset` knows (examples/presets/)");
  presets->footer(kHelpFooter);
  presets->callback([command] {
    command->needs_addr = false;
    command->action = [](Client*) {
      std::cout << PresetsListText();
      return static_cast<int>(kExitOk);
    };
  });
}

}  // namespace ranksweep::client
