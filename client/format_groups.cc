// The grouped results' writers (format.h): the table, the CSV and the JSON
// of a sweep's groups, each optional metric's aggregate among them.
#include "client/format.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/format_internal.h"
#include "client/json_writer.h"
#include "common/spec/result_metrics.h"
#include "nlohmann/json.hpp"

namespace ranksweep::client {

using format_internal::AddAxisKeys;
using format_internal::InsertAxisColumns;
using format_internal::JsonArrayClose;

Table ResultGroupsTable(const std::vector<v1::ResultGroup>& groups, bool has_test_split,
                        const RecipeAxes& axes) {
  Table t;
  t.header = {"HEAD",          "RANK",          "N",        "TRAIN_ERR_MEAN", "TRAIN_ERR_STD",
              "TRAIN_ERR_MIN", "TRAIN_ERR_MAX", "TEST_ERR", "EXACT_SEEDS"};
  t.right_align = {false, true, true, true, true, true, true, true, true};
  for (const auto& g : groups) {
    const bool any = g.n() > 0;
    auto agg = [&](double v) { return any ? FixedText(v, 4) : std::string("-"); };
    const auto& te = g.test_error();
    const bool has_test = any && has_test_split;
    t.rows.push_back({g.head(), RankText(g.rank()), absl::StrCat(g.n(), "/", g.expected()),
                      agg(g.train_error().mean()), agg(g.train_error().std()),
                      agg(g.train_error().min()), agg(g.train_error().max()),
                      has_test ? FixedText(te.mean(), 4) : "-", absl::StrCat(g.exact_seeds())});
  }
  InsertAxisColumns(axes, 2, groups, true, &t);
  return t;
}

namespace {

// The aggregate of the optional metric `name` in `g`, or nullptr (a
// coordinator that predates group metrics, or one without that metric).
const v1::MetricAggregate* FindMetricAggregate(const v1::ResultGroup& g, const char* name) {
  for (const v1::MetricAggregate& a : g.metrics()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}

// One grouped built-in metric as v1::ResultGroup carries it: its Aggregate
// field (named as the metric) and its row of kBuiltInMetrics
// (common/spec/result_metrics.h), whose split says when it is missing.
struct GroupAggregate {
  const google::protobuf::FieldDescriptor* field;
  const BuiltInMetric* metric;
  // Shown for a group with a done cell, a test-split metric only with a
  // test split.
  bool Shown(const v1::ResultGroup& g, bool has_test_split) const {
    return g.n() > 0 && GroupAggregates(*metric, has_test_split);
  }
};

// ResultGroup's Aggregate fields in the order it declares them, which is
// the grouped CSV's column order.
const std::vector<GroupAggregate>& GroupAggregateFields() {
  static const auto* aggregates = [] {
    auto* list = new std::vector<GroupAggregate>();
    const google::protobuf::Descriptor* d = v1::ResultGroup::descriptor();
    for (int i = 0; i < d->field_count(); ++i) {
      const google::protobuf::FieldDescriptor* f = d->field(i);
      if (f->is_repeated() || f->message_type() != v1::Aggregate::descriptor()) continue;
      const BuiltInMetric* m = FindBuiltInMetric(f->name());
      if (m == nullptr) {
        std::fprintf(stderr, "ranksweep.v1.ResultGroup.%s: not a built-in metric\n",
                     f->name().c_str());
        std::abort();
      }
      list->push_back({f, m});
    }
    return list;
  }();
  return *aggregates;
}

const v1::Aggregate& AggregateOf(const v1::ResultGroup& g, const GroupAggregate& a) {
  return static_cast<const v1::Aggregate&>(g.GetReflection()->GetMessage(g, a.field));
}

}  // namespace

// A group's aggregates, with the missing ones (no done seed; no test split)
// as null.
nlohmann::ordered_json ResultGroupJson(const v1::ResultGroup& g, bool has_test_split,
                                       const RecipeAxes& axes) {
  nlohmann::ordered_json j = MessageJsonTree(g);
  AddAxisKeys(axes, g.recipe(), &j);
  for (const GroupAggregate& a : GroupAggregateFields()) {
    if (!a.Shown(g, has_test_split)) j[a.field->name()] = nullptr;
  }
  if (g.n() == 0 || !has_test_split) j["test_exact_seeds"] = nullptr;
  if (!has_test_split) j["test_verdict"] = nullptr;
  // The optional metrics as keys of their own, as the rows print them: an
  // object with n and the aggregate, null when no done cell has the metric.
  j.erase("metrics");
  for (const ResultMetric& m : kResultMetrics) {
    const v1::MetricAggregate* a = FindMetricAggregate(g, m.name);
    if (a == nullptr || a->n() == 0) {
      j[m.name] = nullptr;
      continue;
    }
    nlohmann::ordered_json one = MessageJsonTree(a->aggregate());
    one["n"] = a->n();
    j[m.name] = std::move(one);
  }
  return j;
}

Table ResultGroupsCsvTable(const std::vector<v1::ResultGroup>& groups, bool has_test_split,
                           const RecipeAxes& axes) {
  Table t;
  t.header = {"head", "head_index", "rank", "n", "expected", "exact_seeds"};
  for (const GroupAggregate& a : GroupAggregateFields()) {
    for (const char* f : {"mean", "std", "min", "max", "ci95"}) {
      t.header.push_back(absl::StrCat(a.field->name(), "_", f));
    }
  }
  // Then each optional metric: the done cells that have it, its aggregate.
  for (const ResultMetric& m : kResultMetrics) {
    for (const char* f : {"n", "mean", "std", "min", "max", "ci95"}) {
      t.header.push_back(absl::StrCat(m.name, "_", f));
    }
  }
  for (const auto& g : groups) {
    std::vector<std::string> row = {g.head(),
                                    absl::StrCat(g.head_index()),
                                    RankCell(g.rank()),
                                    absl::StrCat(g.n()),
                                    absl::StrCat(g.expected()),
                                    absl::StrCat(g.exact_seeds())};
    for (const GroupAggregate& a : GroupAggregateFields()) {
      const bool shown = a.Shown(g, has_test_split);
      const v1::Aggregate& agg = AggregateOf(g, a);
      for (double v : {agg.mean(), agg.std(), agg.min(), agg.max(), agg.ci95()}) {
        row.push_back(ShortestCell(shown, v));
      }
    }
    for (const ResultMetric& m : kResultMetrics) {
      const v1::MetricAggregate* a = FindMetricAggregate(g, m.name);
      const int64_t n = a == nullptr ? 0 : a->n();
      row.push_back(a == nullptr ? "" : absl::StrCat(n));
      const v1::Aggregate& agg = a == nullptr ? v1::Aggregate::default_instance() : a->aggregate();
      for (double v : {agg.mean(), agg.std(), agg.min(), agg.max(), agg.ci95()}) {
        row.push_back(ShortestCell(n > 0, v));
      }
    }
    t.rows.push_back(std::move(row));
  }
  if (!axes.empty()) {
    // After rank: the recipe's index, then its axes' values.
    t.header.insert(t.header.begin() + 3, "recipe");
    for (size_t r = 0; r < groups.size(); ++r) {
      t.rows[r].insert(t.rows[r].begin() + 3, absl::StrCat(groups[r].recipe()));
    }
    InsertAxisColumns(axes, 4, groups, false, &t);
  }
  return t;
}

std::string ResultGroupsJson(const std::vector<v1::ResultGroup>& groups, bool has_test_split,
                             const RecipeAxes& axes) {
  // One object per line, as JsonArray writes the rows.
  std::string out = "[";
  for (size_t i = 0; i < groups.size(); ++i) {
    absl::StrAppend(&out, i == 0 ? "\n  " : ",\n  ",
                    ResultGroupJson(groups[i], has_test_split, axes).dump());
  }
  return out + JsonArrayClose(groups.empty());
}

}  // namespace ranksweep::client
