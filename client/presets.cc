#include "client/presets.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/format.h"
#include "client/spec_file.h"
#include "common/spec/dataset_kinds.h"
#include "common/spec/spec_json.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace ranksweep::client {
namespace {

int64_t Clamp(int64_t v, int64_t lo, int64_t hi) { return std::max(lo, std::min(v, hi)); }

std::vector<int> ScaleRanks(const std::vector<int>& ranks, double s) {
  const int64_t n = static_cast<int64_t>(ranks.size());
  if (n == 0) return ranks;
  const int64_t k = Clamp(static_cast<int64_t>(std::ceil(n * s - 1e-9)), std::min<int64_t>(n, 3), n);
  if (k == n) return ranks;
  std::vector<int> out;
  for (int64_t i = 0; i < k; ++i) {
    const int64_t index = k == 1 ? 0 : std::llround(static_cast<double>(i) * (n - 1) / (k - 1));
    if (out.empty() || out.back() != ranks[index]) out.push_back(ranks[index]);
  }
  return out;
}

int64_t ScaleCount(int64_t v, double s, int64_t floor, bool round_up) {
  const double x = v * s;
  const int64_t scaled = round_up ? static_cast<int64_t>(std::ceil(x - 1e-9)) : std::llround(x);
  return Clamp(scaled, std::min(v, floor), v);
}

// Applies the header's scaling rules; returns the resolution line.
std::string Scale(SweepSpec& spec, double s) {
  std::vector<std::string> parts;
  auto note = [&](const std::string& field, int64_t now, int64_t was) {
    parts.push_back(absl::StrCat(field, " ", now, " (of ", was, ")"));
  };
  const std::vector<int> ranks = spec.ranks;
  spec.ranks = ScaleRanks(ranks, s);
  parts.push_back(absl::StrCat("ranks ", absl::StrJoin(spec.ranks, ","), " (of ", ranks.size(),
                               ")"));
  const int64_t seeds = static_cast<int64_t>(SweepSeeds(spec).size());
  const int64_t new_seeds = ScaleCount(seeds, s, 2, /*round_up=*/true);
  if (spec.seeds.empty()) {
    spec.seed_count = static_cast<int>(new_seeds);
  } else {
    spec.seeds.resize(static_cast<size_t>(new_seeds));
  }
  note("seeds", new_seeds, seeds);
  const int steps = spec.train.max_steps;
  spec.train.max_steps = static_cast<int>(ScaleCount(steps, s, 100, false));
  spec.train.eval_every = std::min(spec.train.eval_every, spec.train.max_steps);
  note("max_steps", spec.train.max_steps, steps);
  if (spec.train.warmup_steps > 0 && spec.train.max_steps != steps) {
    // The warm-up keeps its share of the budget (and must fit in it).
    const int w = spec.train.warmup_steps;
    spec.train.warmup_steps = static_cast<int>(std::min<int64_t>(
        std::llround(static_cast<double>(w) * spec.train.max_steps / steps),
        spec.train.max_steps));
    note("warmup_steps", spec.train.warmup_steps, w);
  }
  DatasetSpec& d = spec.dataset;
  // By the fields the kind has (common/spec/dataset_kinds.h).
  if (DatasetKindHasField(d.kind, "num_queries") && d.num_queries > 0) {
    const int q = d.num_queries;
    d.num_queries = static_cast<int>(ScaleCount(q, s, 6, false));
    note("dataset.num_queries", d.num_queries, q);
  }
  if (DatasetKindHasField(d.kind, "pool_size")) {
    const int p = d.pool_size, tr = d.train_size, te = d.test_size;
    d.pool_size = static_cast<int>(ScaleCount(p, s, 40, false));
    d.train_size = static_cast<int>(ScaleCount(tr, s, 200, false));
    d.test_size = static_cast<int>(ScaleCount(te, s, 50, false));
    note("dataset.pool_size", d.pool_size, p);
    note("dataset.train_size", d.train_size, tr);
    note("dataset.test_size", d.test_size, te);
  }
  if (s < 1) spec.name = absl::StrCat(spec.name, "-s", absl::StrFormat("%g", s));
  // Every recipe's cells count: a preset with an lr axis of 3 values has 3x the cells.
  return absl::StrCat(spec.name, ": ", absl::StrJoin(parts, "; "), "; ", GridCellCount(spec),
                      " cells");
}

}  // namespace

std::vector<std::string> PresetNames() {
  std::vector<std::string> names;
  for (const auto& [name, text] : EmbeddedPresetFiles()) names.push_back(name);
  return names;
}

absl::StatusOr<ResolvedPreset> ResolvePresetText(const std::string& name,
                                                 const std::string& yaml, double scale) {
  if (!(scale > 0 && scale <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--scale must be in (0, 1], got ", absl::StrFormat("%g", scale)));
  }
  const std::string source = absl::StrCat("presets/", name, ".yaml");
  ASSIGN_OR_RETURN(std::string json_text, YamlToJson(yaml, source));
  nlohmann::json doc = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || !doc.contains("spec") || !doc["spec"].is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": needs a `spec` object"));
  }
  for (const auto& [key, value] : doc.items()) {
    if (key != "spec" && key != "variants" && key != "description") {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": unknown key \"", key, "\" (spec, variants, description)"));
    }
  }
  ResolvedPreset out;
  out.name = name;
  out.scale = scale;
  if (doc.contains("description") && doc["description"].is_string()) {
    out.description = doc["description"].get<std::string>();
  }
  std::vector<nlohmann::json> specs;
  if (doc.contains("variants")) {
    if (!doc["variants"].is_array() || doc["variants"].empty()) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": variants must be a non-empty list"));
    }
    for (const auto& patch : doc["variants"]) {
      nlohmann::json spec = doc["spec"];
      spec.merge_patch(patch);
      specs.push_back(std::move(spec));
    }
  } else {
    specs.push_back(doc["spec"]);
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    absl::StatusOr<SweepSpec> spec = SweepSpecFromJson(specs[i].dump());
    if (!spec.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": sweep ", i, ": ", spec.status().message()));
    }
    out.resolution.push_back(Scale(*spec, scale));
    if (absl::Status s = ValidateSweepSpec(*spec); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": sweep ", i, " at scale ",
                                                     absl::StrFormat("%g", scale), ": ",
                                                     s.message()));
    }
    out.sweeps.push_back(*std::move(spec));
  }
  return out;
}

absl::StatusOr<ResolvedPreset> ResolvePreset(const std::string& name, double scale) {
  for (const auto& [n, text] : EmbeddedPresetFiles()) {
    if (n == name) return ResolvePresetText(n, text, scale);
  }
  return absl::NotFoundError(absl::StrCat("--preset: no preset \"", name, "\"; the presets are ",
                                          absl::StrJoin(PresetNames(), ", ")));
}

std::string PresetsListText() {
  Table t;
  t.header = {"NAME", "SWEEPS", "CELLS", "DESCRIPTION"};
  t.right_align = {false, true, true, false};
  for (const auto& [name, text] : EmbeddedPresetFiles()) {
    absl::StatusOr<ResolvedPreset> p = ResolvePresetText(name, text, 1.0);
    if (!p.ok()) {
      t.rows.push_back({name, "-", "-", absl::StrCat("(invalid: ", p.status().message(), ")")});
      continue;
    }
    int64_t cells = 0;
    for (const SweepSpec& s : p->sweeps) cells += GridCellCount(s);
    t.rows.push_back({name, absl::StrCat(p->sweeps.size()), absl::StrCat(cells), p->description});
  }
  return RenderTable(t);
}

}  // namespace ranksweep::client
