// Named, ready-made sweeps for the paper's experiments (`ranksweep presets`,
// `ranksweep submit --preset NAME [--scale S]`). The presets are the YAML
// files under examples/presets/, embedded into the binary at build time, so
// the files are both the documentation and the source.
//
// A preset file holds `description` (one line), `spec` (a sweep in the
// spec-file form of spec_file.h) and optionally `variants`: a list of JSON
// merge patches (RFC 7386) applied to `spec`, one sweep each (a sweep has one
// dataset, so e.g. `lengths` runs one sweep per sequence length).
//
// Scaling (0 < s <= 1) shrinks every sweep of a preset so it runs on a small
// CPU; docs/ANALYSIS.md has the table. With K ranks, c seeds, T steps:
//   ranks      k = clamp(ceil(K*s), min(K, 3), K) ranks at evenly spaced
//              positions of the list, first and last kept
//              (1..256 at s = 0.1: 1, 16, 256; at s = 0.5: 1, 4, 16, 64, 256)
//   seeds      clamp(ceil(c*s), min(c, 2), c)
//   max_steps  clamp(round(T*s), min(T, 100), T); eval_every capped at it;
//              warmup_steps W (when > 0) scaled with it: min(round(W*T'/T), T')
//   witness    num_queries (when > 0) clamp(round(q*s), min(q, 6), q)
//   pool       pool_size clamp(round(p*s), min(p, 40), p),
//              train_size clamp(round(t*s), min(t, 200), t),
//              test_size clamp(round(t*s), min(t, 50), t)
//   name       gets the suffix "-s<S>" (e.g. "witness-s0.1") when s < 1.
//
// Errors: NotFound for an unknown preset (the message lists the names),
// InvalidArgument for a scale outside (0, 1] or a preset that does not parse
// or validate (a build-time mistake that the unit test catches).
// Thread-safety: free functions; the embedded table is immutable.
#ifndef RANKSWEEP_CLIENT_PRESETS_H_
#define RANKSWEEP_CLIENT_PRESETS_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/spec/spec.h"

namespace ranksweep::client {

// (name, YAML text) of every file examples/presets/NAME.yaml, by name.
// Defined in the generated presets_data.cc.
const std::vector<std::pair<std::string, std::string>>& EmbeddedPresetFiles();

struct ResolvedPreset {
  std::string name;
  double scale = 1;
  std::string description;
  std::vector<SweepSpec> sweeps;  // each valid (ValidateSweepSpec)
  // One line per sweep saying what the scale resolved to, e.g.
  // "witness-s0.1: ranks 1,16,256 (of 9); seeds 2 (of 5); max_steps 3000 (of
  // 30000); dataset.num_queries 6 (of 26); 8 cells". The cells are the grid's
  // over every recipe (GridCellCount); recipe axes are not scaled.
  std::vector<std::string> resolution;
};

std::vector<std::string> PresetNames();

// Parses preset `name` from its embedded YAML (text given by `yaml`, for
// tests) and applies `scale`.
absl::StatusOr<ResolvedPreset> ResolvePresetText(const std::string& name,
                                                 const std::string& yaml, double scale);
absl::StatusOr<ResolvedPreset> ResolvePreset(const std::string& name, double scale);

// `ranksweep presets`: a table NAME, SWEEPS, CELLS (at scale 1), DESCRIPTION.
std::string PresetsListText();

}  // namespace ranksweep::client

#endif  // RANKSWEEP_CLIENT_PRESETS_H_
