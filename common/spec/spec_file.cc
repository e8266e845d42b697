#include "common/spec/spec_file.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <regex>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/spec/dataset_kinds.h"
#include "common/spec/spec_json.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "yaml-cpp/yaml.h"

namespace ranksweep {
namespace {

using Json = nlohmann::ordered_json;

// Where each mapping key of a YAML document sits, by dotted path
// ("dataset.m", "heads[1].kind"), so spec-parser errors can point at it.
using MarkIndex = std::map<std::string, YAML::Mark>;

std::string Where(const std::string& source, const YAML::Mark& mark) {
  return absl::StrCat(source, ":", mark.line + 1, ":", mark.column + 1);
}

absl::Status YamlError(const std::string& source, const YAML::Mark& mark,
                       const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(Where(source, mark), ": ", what));
}

// YAML 1.2 core schema resolution of a plain scalar.
absl::StatusOr<Json> PlainScalarToJson(const std::string& v, const std::string& source,
                                       const YAML::Mark& mark) {
  static const std::regex kInt("[-+]?[0-9]+");
  static const std::regex kHex("0x[0-9a-fA-F]+");
  static const std::regex kFloat("[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?");
  static const std::regex kInf("[-+]?\\.(inf|Inf|INF)|\\.(nan|NaN|NAN)");
  if (v.empty() || v == "~" || v == "null" || v == "Null" || v == "NULL") return Json(nullptr);
  if (v == "true" || v == "True" || v == "TRUE") return Json(true);
  if (v == "false" || v == "False" || v == "FALSE") return Json(false);
  if (std::regex_match(v, kInt)) {
    if (v[0] == '-') {
      int64_t x;
      if (!absl::SimpleAtoi(v, &x)) {
        return YamlError(source, mark, absl::StrCat("integer out of range: ", v));
      }
      return Json(x);
    }
    uint64_t x;
    if (!absl::SimpleAtoi(v[0] == '+' ? v.substr(1) : v, &x)) {
      return YamlError(source, mark, absl::StrCat("integer out of range: ", v));
    }
    return Json(x);
  }
  if (std::regex_match(v, kHex)) {
    uint64_t x;
    if (!absl::SimpleHexAtoi(v, &x)) {
      return YamlError(source, mark, absl::StrCat("integer out of range: ", v));
    }
    return Json(x);
  }
  if (std::regex_match(v, kFloat)) {
    errno = 0;
    double x = std::strtod(v.c_str(), nullptr);
    if (errno == ERANGE || !std::isfinite(x)) {
      return YamlError(source, mark, absl::StrCat("number out of range: ", v));
    }
    return Json(x);
  }
  if (std::regex_match(v, kInf)) {
    return YamlError(source, mark, absl::StrCat("non-finite number not allowed: ", v));
  }
  return Json(v);
}

// A spec is a few levels deep and a few hundred values; YAML aliases can
// make a file of a few bytes refer to itself (endless) or to a node many
// times over (exponential). Past these limits the file is refused.
constexpr int kMaxYamlDepth = 32;
constexpr int64_t kMaxYamlNodes = 100000;

// How deep the current node is and how many nodes were converted so far.
struct YamlBudget {
  int depth = 0;
  int64_t nodes = 0;
};

absl::StatusOr<Json> NodeToJson(const YAML::Node& node, const std::string& path,
                                const std::string& source, MarkIndex* marks,
                                YamlBudget* budget) {
  if (budget->depth > kMaxYamlDepth) {
    return YamlError(source, node.Mark(),
                     absl::StrCat("nested more than ", kMaxYamlDepth,
                                  " levels deep (an alias that refers to a node it is in?)"));
  }
  if (++budget->nodes > kMaxYamlNodes) {
    return YamlError(source, node.Mark(),
                     absl::StrCat("more than ", kMaxYamlNodes,
                                  " values (aliases that repeat a node many times?)"));
  }
  struct Deeper {
    explicit Deeper(YamlBudget* b) : b(b) { ++b->depth; }
    ~Deeper() { --b->depth; }
    YamlBudget* b;
  } deeper(budget);
  switch (node.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null:
      return Json(nullptr);
    case YAML::NodeType::Scalar:
      // yaml-cpp tags quoted scalars "!" and plain ones "?".
      if (node.Tag() == "!") return Json(node.Scalar());
      return PlainScalarToJson(node.Scalar(), source, node.Mark());
    case YAML::NodeType::Sequence: {
      Json out = Json::array();
      for (size_t i = 0; i < node.size(); ++i) {
        std::string item_path = absl::StrCat(path, "[", i, "]");
        (*marks)[item_path] = node[i].Mark();
        ASSIGN_OR_RETURN(Json item, NodeToJson(node[i], item_path, source, marks, budget));
        out.push_back(std::move(item));
      }
      return out;
    }
    case YAML::NodeType::Map: {
      Json out = Json::object();
      for (const auto& kv : node) {
        if (!kv.first.IsScalar()) {
          return YamlError(source, kv.first.Mark(), "mapping keys must be plain strings");
        }
        const std::string key = kv.first.Scalar();
        if (out.contains(key)) {
          return YamlError(source, kv.first.Mark(), absl::StrCat("duplicate key \"", key, "\""));
        }
        std::string key_path = path.empty() ? key : absl::StrCat(path, ".", key);
        (*marks)[key_path] = kv.first.Mark();
        ASSIGN_OR_RETURN(Json value, NodeToJson(kv.second, key_path, source, marks, budget));
        out[key] = std::move(value);
      }
      return out;
    }
  }
  return YamlError(source, node.Mark(), "unsupported YAML node");
}

// The 1-based line:column of the first byte that is not valid UTF-8, or
// nullopt when the text is valid. yaml-cpp passes such bytes through, and
// the JSON form cannot carry them.
std::optional<std::pair<int, int>> FirstInvalidUtf8(const std::string& text) {
  int line = 1, col = 1;
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || i + len > text.size()) return std::make_pair(line, col);
    for (size_t k = 1; k < len; ++k) {
      if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80) return std::make_pair(line, col);
    }
    if (c == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
    i += len;
  }
  return std::nullopt;
}

absl::StatusOr<std::pair<std::string, MarkIndex>> YamlToJsonWithMarks(const std::string& text,
                                                                      const std::string& source) {
  if (auto bad = FirstInvalidUtf8(text)) {
    return absl::InvalidArgumentError(absl::StrCat(source, ":", bad->first, ":", bad->second,
                                                   ": the file is not valid UTF-8"));
  }
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return YamlError(source, e.mark, e.msg);
  }
  MarkIndex marks;
  Json json;
  try {
    YamlBudget budget;
    ASSIGN_OR_RETURN(json, NodeToJson(root, "", source, &marks, &budget));
  } catch (const YAML::Exception& e) {
    return YamlError(source, e.mark, e.msg);
  }
  if (!json.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ":1:1: a sweep spec must be a mapping of fields"));
  }
  return std::make_pair(json.dump(2, ' ', false, Json::error_handler_t::replace),
                        std::move(marks));
}

// Adds the YAML location of the key an error message talks about: the
// longest recorded path that the message mentions.
absl::Status LocateInYaml(const absl::Status& status, const MarkIndex& marks,
                          const std::string& source) {
  const std::string message(status.message());
  const std::string* best = nullptr;
  for (const auto& [path, mark] : marks) {
    if (!absl::StrContains(message, path)) continue;
    if (best == nullptr || path.size() > best->size()) best = &path;
  }
  if (best == nullptr) return absl::Status(status.code(), absl::StrCat(source, ": ", message));
  return absl::Status(status.code(),
                      absl::StrCat(Where(source, marks.at(*best)), ": ", message));
}

}  // namespace

SpecFormat GuessSpecFormat(const std::string& path, const std::string& text) {
  std::string lower = absl::AsciiStrToLower(path);
  if (absl::EndsWith(lower, ".json")) return SpecFormat::kJson;
  if (absl::EndsWith(lower, ".yaml") || absl::EndsWith(lower, ".yml")) return SpecFormat::kYaml;
  absl::string_view stripped = absl::StripLeadingAsciiWhitespace(text);
  return absl::StartsWith(stripped, "{") ? SpecFormat::kJson : SpecFormat::kYaml;
}

absl::StatusOr<SpecFormat> ParseSpecFormat(const std::string& name, const std::string& text,
                                           const std::string& field) {
  if (name == "json") return SpecFormat::kJson;
  if (name == "yaml") return SpecFormat::kYaml;
  if (name.empty()) return GuessSpecFormat("", text);
  return absl::InvalidArgumentError(absl::StrCat(
      field, " must be one of json, yaml or empty (guess); got \"", name.substr(0, 200), "\""));
}

absl::StatusOr<std::string> YamlToJson(const std::string& yaml_text, const std::string& source) {
  ASSIGN_OR_RETURN(auto converted, YamlToJsonWithMarks(yaml_text, source));
  return std::move(converted.first);
}

absl::StatusOr<SweepSpec> ParseSweepSpecText(const std::string& text, SpecFormat format,
                                             const std::string& source) {
  if (format == SpecFormat::kJson) {
    absl::StatusOr<SweepSpec> spec = SweepSpecFromJson(text);
    if (!spec.ok()) {
      return absl::Status(spec.status().code(),
                          absl::StrCat(source, ": ", spec.status().message()));
    }
    return spec;
  }
  ASSIGN_OR_RETURN(auto converted, YamlToJsonWithMarks(text, source));
  absl::StatusOr<SweepSpec> spec = SweepSpecFromJson(converted.first);
  if (!spec.ok()) return LocateInYaml(spec.status(), converted.second, source);
  return spec;
}

absl::StatusOr<SweepSpec> LoadSweepSpecFile(const std::string& path) {
  std::string text;
  if (path == "-") {
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  } else {
    std::ifstream in(path, std::ios::binary);
    if (!in) return absl::NotFoundError(absl::StrCat("cannot open spec file ", path));
    std::ostringstream buf;
    buf << in.rdbuf();
    text = buf.str();
  }
  const std::string source = path == "-" ? "<stdin>" : path;
  return ParseSweepSpecText(text, GuessSpecFormat(path, text), source);
}

std::vector<std::string> SpecWarnings(const SweepSpec& spec) {
  std::vector<std::string> warnings;
  std::vector<std::string> kernels;
  for (const HeadSpec& h : spec.heads) {
    if (ReadoutEscapesRankBound(h, spec.train)) kernels.push_back(HeadLabel(h));
  }
  if (!kernels.empty()) {
    warnings.push_back(absl::StrCat(
        "train.loss ce: ", absl::StrJoin(kernels, ", "),
        " will be judged by the argmax of m+1 logits, not by the paper's readout (one affine "
        "output within 1/2 of the target); under ce a trained rank-1 kernel head is exact on the "
        "witness family, so transition ranks here do not test the rank bound. Use loss mse for "
        "that (docs/TRAINER.md)."));
  }
  return warnings;
}

SweepCost EstimateSweepCost(const SweepSpec& spec) {
  SweepCost cost;
  std::vector<uint64_t> seeds = SweepSeeds(spec);
  constexpr size_t kFusedSeeds = 64;  // a worker's default --max-seeds
  if (seeds.size() > kFusedSeeds) seeds.resize(kFusedSeeds);
  // With dataset axes the recipes differ in size: the largest counts.
  const int recipes = static_cast<int>(std::min<int64_t>(RecipeCount(spec), 100000));
  for (int recipe = 0; recipe < recipes; ++recipe) {
    const DatasetSize size = EstimateDatasetSize(
        spec.heads.empty() ? spec.dataset : MakeTaskSpec(spec, 0, 0, recipe, {}).dataset);
    if (size.train + size.test > cost.train_sequences + cost.test_sequences) {
      cost.train_sequences = size.train;
      cost.test_sequences = size.test;
    }
    for (int h = 0; h < static_cast<int>(spec.heads.size()); ++h) {
      const std::vector<int> ranks =
          HeadHasRank(spec.heads[h]) ? spec.ranks : std::vector<int>{0};
      for (int rank : ranks) {
        const int64_t bytes =
            EstimateTaskMemoryBytes(MakeTaskSpec(spec, h, rank, recipe, seeds));
        if (bytes <= cost.task_memory_bytes) continue;
        cost.task_memory_bytes = bytes;
        const std::string label = RecipeLabel(spec, recipe);
        cost.largest_task = absl::StrCat(
            HeadLabel(spec.heads[h]), rank > 0 ? absl::StrCat(" at rank ", rank) : "",
            label.empty() ? "" : absl::StrCat(" with ", label), ", ", seeds.size(),
            seeds.size() == 1 ? " seed" : " seeds");
      }
    }
  }
  return cost;
}

namespace {

// 1150203 -> "1,150,203".
std::string WithThousands(int64_t n) {
  std::string digits = absl::StrCat(n);
  for (int i = static_cast<int>(digits.size()) - 3; i > (n < 0 ? 1 : 0); i -= 3) {
    digits.insert(static_cast<size_t>(i), ",");
  }
  return digits;
}

}  // namespace

std::vector<std::string> SweepCostLines(const SweepCost& cost) {
  return {absl::StrCat("dataset: ", WithThousands(cost.train_sequences), " train sequences, ",
                       cost.test_sequences > 0
                           ? absl::StrCat(WithThousands(cost.test_sequences), " test sequences")
                           : "no test split"),
          absl::StrCat("memory: up to ", FormatBytes(cost.task_memory_bytes),
                       " for the largest task (", cost.largest_task,
                       "; an upper-bound estimate, docs/LIMITS.md)")};
}

std::vector<std::string> SweepCostWarnings(const SweepSpec& spec, const SweepCost& cost) {
  std::vector<std::string> warnings;
  const int64_t sequences = cost.train_sequences + cost.test_sequences;
  if (sequences > kLargeDatasetSequences) {
    const DatasetKindRow* kind = FindDatasetKind(spec.dataset.kind);
    const std::string shrink = kind != nullptr ? kind->shrink_flags : "--m or --seq-len";
    warnings.push_back(absl::StrCat("the dataset has ", WithThousands(sequences),
                                    " sequences, more than ", WithThousands(kLargeDatasetSequences),
                                    ": every step and evaluation goes over it; ", shrink,
                                    " makes it smaller"));
  }
  if (cost.task_memory_bytes > kLargeTaskMemoryBytes) {
    warnings.push_back(absl::StrCat("the largest task (", cost.largest_task,
                                    ") may need up to ", FormatBytes(cost.task_memory_bytes),
                                    " (an upper-bound estimate), more than ",
                                    FormatBytes(kLargeTaskMemoryBytes),
                                    "; --batch-size or a smaller dataset lowers it"));
  }
  return warnings;
}

std::vector<std::string> SweepWarnings(const SweepSpec& spec, const SweepCost& cost) {
  std::vector<std::string> warnings = SpecWarnings(spec);
  for (std::string& w : SweepCostWarnings(spec, cost)) warnings.push_back(std::move(w));
  return warnings;
}

}  // namespace ranksweep
