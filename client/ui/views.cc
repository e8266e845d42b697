#include "client/ui/views.h"

#include <charconv>
#include <cmath>

#include "client/format.h"
#include "client/sweep_views.h"
#include "common/spec/result_metrics.h"
#include "common/spec/spec.h"
#include "common/spec/spec_json.h"
#include "proto/convert.h"

namespace ranksweep::client::ui {
namespace {

// A unix time in ms, null when 0 (not set).
Json TimeOrNull(int64_t unix_ms) { return unix_ms == 0 ? Json(nullptr) : Json(unix_ms); }

// Ranks are 1..65536; rank-less heads (softmax) carry 0.
Json RankOrNull(int32_t rank) { return rank == 0 ? Json(nullptr) : Json(rank); }

Json AggregateView(const v1::Aggregate& a) {
  return Json{{"mean", a.mean()}, {"ci95", a.ci95()}, {"std", a.std()}, {"min", a.min()},
              {"max", a.max()}};
}

// The cell of `value` in RowsCsv.
std::string CsvCell(const Json& value) {
  if (value.is_null()) return "";
  if (value.is_string()) return value.get<std::string>();
  if (value.is_boolean()) return value.get<bool>() ? "true" : "false";
  if (value.is_number_float()) return ShortestDouble(value.get<double>());
  return value.dump();
}

// The optional metrics as the rows page lists its columns: key and label.
Json RowMetricsView() {
  Json out = Json::array();
  for (const ResultMetric& m : kResultMetrics) out.push_back({{"key", m.name}, {"label", m.label}});
  return out;
}

}  // namespace

std::string ShortestDouble(double v) {
  if (!std::isfinite(v)) return std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, end);
}

Json SweepView(const v1::SweepInfo& sweep) {
  const SweepSpec spec = FromProto(sweep.spec());
  const auto& c = sweep.counts();
  Json heads = Json::array();
  for (int i = 0; i < static_cast<int>(spec.heads.size()); ++i) {
    heads.push_back(
        {{"index", i}, {"label", HeadLabel(spec.heads[i])}, {"has_rank", HeadHasRank(spec.heads[i])}});
  }
  const bool running = sweep.state() == v1::SWEEP_STATE_RUNNING;
  const double eta = running ? EstimateEtaSeconds(sweep) : -1;
  const bool has_test = HasTestSplit(spec);
  Json failures = Json::array();
  for (const std::string& f : sweep.recent_failures()) failures.push_back(f);
  // The recipe axes and every recipe's label and values, by which the pages
  // label a row's recipe (RowView's "recipe" indexes `recipes`).
  Json axes = Json::array();
  for (const SweepAxis& a : spec.axes) axes.push_back({{"name", a.name}, {"values", a.values}});
  Json recipes = Json::array();
  const int64_t recipe_count = RecipeCount(spec);
  for (int k = 0; k < recipe_count; ++k) {
    Json values = Json::object();
    const std::vector<double> v = RecipeValues(spec, k);
    for (size_t i = 0; i < spec.axes.size(); ++i) values[spec.axes[i].name] = v[i];
    recipes.push_back({{"recipe", k}, {"label", RecipeLabel(spec, k)}, {"values", values}});
  }
  return Json{
      {"id", sweep.sweep_id()},
      {"name", sweep.name()},
      {"owner", sweep.owner()},
      {"state", SweepStateName(sweep.state())},
      {"priority", sweep.priority()},
      {"counts",
       {{"total", c.total()},
        {"pending", c.pending()},
        {"leased", c.leased()},
        {"done", c.done()},
        {"failed", c.failed()},
        {"cancelled", c.cancelled()},
        {"pruned", c.pruned()}}},
      {"grid_cells", sweep.grid_cells()},
      {"cached_cells", sweep.cached_cells()},
      {"eta_seconds", eta < 0 ? Json(nullptr) : Json(eta)},
      {"eta", eta < 0 ? "" : FormatDuration(eta)},
      {"created_unix_ms", TimeOrNull(sweep.created_unix_ms())},
      {"finished_unix_ms", TimeOrNull(sweep.finished_unix_ms())},
      {"mean_cell_seconds", sweep.mean_cell_seconds()},
      {"recent_failures", failures},
      {"row_metrics", RowMetricsView()},
      {"mode", Name(spec.mode)},
      {"dataset", Name(spec.dataset.kind)},
      {"has_test_split", has_test},
      {"heads", heads},
      {"ranks", spec.ranks},
      {"seeds", SweepSeeds(spec).size()},
      {"axes", axes},
      {"recipes", recipes},
      {"spec", Json::parse(SweepSpecToJson(spec))},
  };
}

Json ManagedSweepView(const v1::ManagedSweep& sweep) {
  Json out = SweepView(sweep.sweep());
  out["note"] = sweep.note();
  out["tags"] = Json(std::vector<std::string>(sweep.tags().begin(), sweep.tags().end()));
  out["archived"] = sweep.archived();
  return out;
}

Json ManagedSweepsView(const std::vector<v1::ManagedSweep>& sweeps) {
  Json out = Json::array();
  for (const auto& s : sweeps) out.push_back(ManagedSweepView(s));
  return out;
}

const std::vector<std::string>& RowColumns() {
  static const auto* kColumns = [] {
    auto* columns = new std::vector<std::string>{
        "cell_id", "head", "head_index", "rank", "seed", "recipe", "state", "train_error",
        "test_error",
        "train_exact_accuracy", "train_position_accuracy", "final_loss", "steps"};
    // The optional metrics (common/spec/result_metrics.h), after steps.
    for (const ResultMetric& m : kResultMetrics) columns->push_back(m.name);
    columns->insert(columns->end(), {"wall_seconds", "device", "worker_id", "attempt",
                                     "finished_unix_ms", "cached", "failure"});
    return columns;
  }();
  return *kColumns;
}

Json RowView(const v1::ResultRow& row) {
  // A row a quarantine invalidated keeps the metrics it was stored with
  // (the CLI prints them too); only the pages leave it out of plots.
  const bool done =
      (row.state() == v1::CELL_STATE_DONE || row.state() == v1::CELL_STATE_INVALID) &&
      row.has_result();
  const v1::SeedResult& r = row.result();
  auto metric = [done](double v) { return done ? Json(v) : Json(nullptr); };
  const bool has_test = done && r.test().sequences() > 0;
  Json view = Json{
      {"cell_id", row.cell_id()},
      {"head", row.head()},
      {"head_index", row.head_index()},
      {"rank", RankOrNull(row.rank())},
      {"seed", row.seed()},
      {"recipe", row.recipe()},
      {"state", CellStateName(row.state())},
      {"train_error", metric(r.train().error())},
      {"test_error", has_test ? Json(r.test().error()) : Json(nullptr)},
      {"train_exact_accuracy", metric(r.train().exact_accuracy())},
      {"train_position_accuracy", metric(r.train().position_accuracy())},
      {"final_loss", metric(r.final_loss())},
      {"steps", done ? Json(r.steps()) : Json(nullptr)},
  };
  // The optional metrics, in RowColumns' order.
  for (const ResultMetric& m : kResultMetrics) {
    const std::optional<double> v = done ? GetProtoMetric(m, r) : std::nullopt;
    view[m.name] = !v.has_value() ? Json(nullptr)
                   : m.integer    ? Json(static_cast<int64_t>(*v))
                                  : Json(*v);
  }
  view["wall_seconds"] = metric(r.wall_seconds());
  view["device"] = done ? Json(r.device()) : Json(nullptr);
  view["worker_id"] = row.worker_id();
  view["attempt"] = row.attempt();
  view["finished_unix_ms"] = TimeOrNull(row.finished_unix_ms());
  view["cached"] = row.cached_from_cell_id() != 0;
  view["failure"] = row.failure().empty() ? Json(nullptr) : Json(row.failure());
  return view;
}

Json RowsView(const std::vector<v1::ResultRow>& rows) {
  Json out = Json::array();
  for (const auto& r : rows) out.push_back(RowView(r));
  return out;
}

std::string RowsCsv(const std::vector<v1::ResultRow>& rows) {
  Table table;
  table.header = RowColumns();
  for (const auto& row : rows) {
    const Json view = RowView(row);
    std::vector<std::string> cells;
    for (const std::string& column : RowColumns()) cells.push_back(CsvCell(view.at(column)));
    table.rows.push_back(std::move(cells));
  }
  return RenderCsv(table);
}

Json SummaryView(const v1::QueryResultsResponse& grouped) {
  Json facts = nullptr;
  if (grouped.has_facts()) {
    const auto& f = grouped.facts();
    facts = Json{{"train_sequences", f.train_sequences()},
                 {"test_sequences", f.test_sequences()},
                 {"distinct_queries", f.distinct_queries()},
                 {"rank_lower_bound", f.rank_lower_bound() == 0 ? Json(nullptr)
                                                                : Json(f.rank_lower_bound())},
                 {"rank_upper_bound", f.rank_upper_bound() == 0 ? Json(nullptr)
                                                                : Json(f.rank_upper_bound())}};
  }
  Json heads = Json::array();
  for (const v1::HeadSummary& h : grouped.heads()) {
    Json groups = Json::array();
    for (const v1::ResultGroup& g : grouped.groups()) {
      if (g.head_index() != h.head_index()) continue;
      Json missing = Json::array();
      for (uint64_t s : g.missing_seeds()) missing.push_back(s);
      const bool any = g.n() > 0;
      const auto label = grouped.recipe_labels().find(g.recipe());
      groups.push_back(Json{
          {"rank", RankOrNull(g.rank())},
          {"recipe", g.recipe()},
          {"recipe_label",
           label == grouped.recipe_labels().end() ? std::string() : label->second},
          {"n", g.n()},
          {"expected", g.expected()},
          {"train_error", any ? AggregateView(g.train_error()) : Json(nullptr)},
          {"test_error",
           any && h.has_test_split() ? AggregateView(g.test_error()) : Json(nullptr)},
          {"exact_seeds", g.exact_seeds()},
          {"test_exact_seeds", h.has_test_split() ? Json(g.test_exact_seeds()) : Json(nullptr)},
          {"missing_seeds", missing},
      });
    }
    heads.push_back(Json{
        {"head", h.head()},
        {"head_index", h.head_index()},
        {"has_rank", h.has_rank()},
        {"transition_rank", h.transition_defined() && h.has_rank() ? Json(h.transition_rank())
                                                                   : Json(nullptr)},
        {"reason", h.reason()},
        {"has_test_split", h.has_test_split()},
        {"test_transition_rank", h.test_transition_defined() && h.has_rank()
                                     ? Json(h.test_transition_rank())
                                     : Json(nullptr)},
        {"test_reason", h.test_reason()},
        {"caveat", h.caveat()},
        {"groups", groups},
    });
  }
  return Json{{"facts", facts}, {"heads", heads}};
}

Json WorkerView(const v1::WorkerInfo& w, int64_t now_unix_ms) {
  return Json{
      {"id", w.worker_id()},
      {"hostname", w.hostname()},
      {"device", w.device()},
      {"device_name", w.device_name()},
      {"memory_bytes", w.memory_bytes()},
      {"slots", w.slots()},
      {"version",
       {{"build_id", w.version().build_id()},
        {"torch", w.version().torch_version()},
        {"cuda", w.version().cuda_version()}}},
      {"registered_unix_ms", TimeOrNull(w.registered_unix_ms())},
      {"last_seen_unix_ms", TimeOrNull(w.last_seen_unix_ms())},
      {"last_seen_ago_seconds",
       w.last_seen_unix_ms() == 0
           ? Json(nullptr)
           : Json(static_cast<double>(now_unix_ms - w.last_seen_unix_ms()) / 1000.0)},
      {"alive", w.alive()},
      {"leased_cells", w.leased_cells()},
      {"completed_cells", w.completed_cells()},
      // A quarantine's hold: on the worker itself (since when), or on the
      // token that registered it (the quarantined worker whose hold it is).
      {"quarantined_unix_ms", TimeOrNull(w.quarantined_unix_ms())},
      {"token_held_by", w.token_held_by().empty() ? Json(nullptr) : Json(w.token_held_by())},
  };
}

Json WorkersView(const std::vector<v1::WorkerInfo>& workers, int64_t now_unix_ms) {
  Json out = Json::array();
  for (const auto& w : workers) out.push_back(WorkerView(w, now_unix_ms));
  return out;
}

Json CurvesView(const std::vector<v1::ResultRow>& rows) {
  Json out = Json::array();
  for (const v1::ResultRow& row : rows) {
    if (row.state() != v1::CELL_STATE_DONE || row.result().curve().steps_size() == 0) continue;
    const v1::Curve& c = row.result().curve();
    auto list = [](const auto& values) {
      Json a = Json::array();
      for (const auto v : values) a.push_back(v);
      return a;
    };
    out.push_back(Json{{"cell_id", row.cell_id()},
                       {"seed", row.seed()},
                       {"recipe", row.recipe()},
                       {"has_test", c.has_test()},
                       {"step", list(c.steps())},
                       {"loss", list(c.loss())},
                       {"train_error", list(c.train_error())},
                       {"train_position_accuracy", list(c.train_position_accuracy())},
                       {"test_error", c.has_test() ? list(c.test_error()) : Json(nullptr)},
                       {"test_position_accuracy",
                        c.has_test() ? list(c.test_position_accuracy()) : Json(nullptr)}});
  }
  return out;
}

}  // namespace ranksweep::client::ui
