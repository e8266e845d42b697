#include "client/ui/views.h"

#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace ranksweep::client::ui {
namespace {

template <typename T>
T Parse(const std::string& text) {
  T message;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &message)) << text;
  return message;
}

constexpr char kRunningSweep[] = R"pb(
  sweep_id: "s1" name: "demo" owner: "alice" state: SWEEP_STATE_RUNNING
  counts { total: 6 pending: 2 leased: 2 done: 1 failed: 1 }
  created_unix_ms: 1700000000000 mean_cell_seconds: 3 priority: 5 grid_cells: 6
  recent_failures: "kernel/elu1 r=2 seed=1: out of memory"
  spec {
    name: "demo" dataset { kind: DATASET_KIND_EXHAUSTIVE m: 2 seq_len: 3 }
    heads { kind: HEAD_KIND_KERNEL feature_map: FEATURE_MAP_ELU1 }
    heads { kind: HEAD_KIND_SOFTMAX }
    ranks: 1 ranks: 2 seed_count: 2
  }
)pb";

TEST(SweepViewTest, RunningSweep) {
  const Json v = SweepView(Parse<v1::SweepInfo>(kRunningSweep));
  EXPECT_EQ(v["id"], "s1");
  EXPECT_EQ(v["owner"], "alice");
  EXPECT_EQ(v["state"], "RUNNING");
  EXPECT_EQ(v["counts"]["done"], 1);
  EXPECT_EQ(v["counts"]["total"], 6);
  // 4 cells left at 3 s each, 2 running at once.
  EXPECT_EQ(v["eta_seconds"], 6.0);
  EXPECT_EQ(v["eta"], "6s");
  EXPECT_EQ(v["created_unix_ms"], 1700000000000);
  EXPECT_TRUE(v["finished_unix_ms"].is_null());
  EXPECT_EQ(v["recent_failures"].size(), 1u);
  EXPECT_EQ(v["dataset"], "exhaustive");
  EXPECT_EQ(v["mode"], "grid");
  EXPECT_EQ(v["has_test_split"], false);
  EXPECT_EQ(v["seeds"], 2);
  ASSERT_EQ(v["heads"].size(), 2u);
  EXPECT_EQ(v["heads"][0].dump(), R"({"index":0,"label":"kernel/elu1","has_rank":true})");
  EXPECT_EQ(v["heads"][1]["has_rank"], false);
  EXPECT_EQ(v["ranks"].dump(), "[1,2]");
  EXPECT_EQ(v["spec"]["name"], "demo");
}

TEST(SweepViewTest, RecipesFromTheAxes) {
  auto info = Parse<v1::SweepInfo>(kRunningSweep);
  EXPECT_EQ(SweepView(info)["axes"].dump(), "[]");
  EXPECT_EQ(SweepView(info)["recipes"].dump(), R"([{"recipe":0,"label":"","values":{}}])");
  v1::SweepAxis* lr = info.mutable_spec()->add_axes();
  lr->set_name("lr");
  lr->add_values(0.01);
  lr->add_values(0.003);
  v1::SweepAxis* steps = info.mutable_spec()->add_axes();
  steps->set_name("max_steps");
  steps->add_values(100);
  steps->add_values(200);
  const Json v = SweepView(info);
  EXPECT_EQ(v["axes"].dump(),
            R"([{"name":"lr","values":[0.01,0.003]},{"name":"max_steps","values":[100.0,200.0]}])");
  ASSERT_EQ(v["recipes"].size(), 4u);
  // The first axis slowest: recipe 2 is (lr 0.003, max_steps 100).
  EXPECT_EQ(v["recipes"][2].dump(),
            R"({"recipe":2,"label":"lr=0.003 max_steps=100","values":{"lr":0.003,"max_steps":100.0}})");
}

TEST(SweepViewTest, FinishedSweepHasNoEta) {
  auto info = Parse<v1::SweepInfo>(kRunningSweep);
  info.set_state(v1::SWEEP_STATE_DONE);
  info.set_finished_unix_ms(1700000001000);
  const Json v = SweepView(info);
  EXPECT_EQ(v["state"], "DONE");
  EXPECT_TRUE(v["eta_seconds"].is_null());
  EXPECT_EQ(v["eta"], "");
  EXPECT_EQ(v["finished_unix_ms"], 1700000001000);
}

TEST(SweepViewTest, RunningWithoutEstimate) {
  auto info = Parse<v1::SweepInfo>(kRunningSweep);
  info.set_mean_cell_seconds(0);
  EXPECT_TRUE(SweepView(info)["eta_seconds"].is_null());
}

TEST(RowViewTest, DoneRowWithoutTestSplit) {
  const auto row = Parse<v1::ResultRow>(R"pb(
    cell_id: 7 head: "kernel/elu1" head_index: 0 rank: 2 seed: 1 state: CELL_STATE_DONE
    worker_id: "w1" attempt: 1 finished_unix_ms: 1700000002000
    result { train { sequences: 64 error: 0.25 exact_accuracy: 0.75 position_accuracy: 0.9 }
             final_loss: 0.125 steps: 300 wall_seconds: 1.5 device: "cpu" })pb");
  const Json v = RowView(row);
  EXPECT_EQ(v.dump(),
            R"({"cell_id":7,"head":"kernel/elu1","head_index":0,"rank":2,"seed":1,"recipe":0,)"
            R"("state":"DONE",)"
            R"("train_error":0.25,"test_error":null,"train_exact_accuracy":0.75,)"
            R"("train_position_accuracy":0.9,"final_loss":0.125,"steps":300,)"
            R"("first_exact_step":null,"final_test_loss":null,"wall_seconds":1.5,)"
            R"("device":"cpu","worker_id":"w1","attempt":1,"finished_unix_ms":1700000002000,)"
            R"("cached":false,"failure":null})");
  std::vector<std::string> keys;
  for (const auto& [key, value] : v.items()) keys.push_back(key);
  EXPECT_EQ(keys, RowColumns());
}

TEST(RowViewTest, FailedRankLessRowHasNullMetrics) {
  const auto row = Parse<v1::ResultRow>(R"pb(
    cell_id: 8 head: "softmax" head_index: 1 rank: 0 seed: 0 state: CELL_STATE_FAILED
    failure: "boom" attempt: 3)pb");
  const Json v = RowView(row);
  EXPECT_TRUE(v["rank"].is_null());
  EXPECT_TRUE(v["train_error"].is_null());
  EXPECT_TRUE(v["steps"].is_null());
  EXPECT_TRUE(v["finished_unix_ms"].is_null());
  EXPECT_EQ(v["state"], "FAILED");
  EXPECT_EQ(v["failure"], "boom");
}

TEST(RowViewTest, InvalidatedRowKeepsItsMetricsAndNote) {
  const auto row = Parse<v1::ResultRow>(R"pb(
    cell_id: 7 head: "kernel/elu1" head_index: 0 rank: 2 seed: 1 state: CELL_STATE_INVALID
    worker_id: "w-bad" attempt: 1 finished_unix_ms: 1700000002000
    failure: "invalidated 2026-12-01T14:00:00Z by ops: quarantine 1 of worker w-bad"
    result { train { sequences: 64 error: 0.25 exact_accuracy: 0.75 position_accuracy: 0.9 }
             final_loss: 0.125 steps: 300 wall_seconds: 1.5 device: "cpu" })pb");
  const Json v = RowView(row);
  EXPECT_EQ(v["state"], "INVALID");
  EXPECT_EQ(v["train_error"], 0.25);
  EXPECT_EQ(v["train_exact_accuracy"], 0.75);
  EXPECT_EQ(v["steps"], 300);
  EXPECT_EQ(v["device"], "cpu");
  EXPECT_TRUE(v["test_error"].is_null());
  EXPECT_EQ(v["failure"], "invalidated 2026-12-01T14:00:00Z by ops: quarantine 1 of worker w-bad");
  EXPECT_EQ(RowsCsv({row}).substr(RowsCsv({row}).find('\n') + 1),
            "7,kernel/elu1,0,2,1,0,INVALID,0.25,,0.75,0.9,0.125,300,,,1.5,cpu,w-bad,1,1700000002000,"
            "false,invalidated 2026-12-01T14:00:00Z by ops: quarantine 1 of worker w-bad\n");
}

TEST(RowsCsvTest, HeaderNullsAndShortestFloats) {
  const auto done = Parse<v1::ResultRow>(R"pb(
    cell_id: 1 head: "kernel/elu1" rank: 4 seed: 0 state: CELL_STATE_DONE cached_from_cell_id: 9
    result { train { sequences: 8 error: 0.1 exact_accuracy: 0.9 position_accuracy: 0.30000000000000004 }
             test { sequences: 4 error: 0.5 } final_loss: 1e-05 steps: 10 first_exact_step: 10
             wall_seconds: 2 device: "cpu" })pb");
  const auto failed = Parse<v1::ResultRow>(R"pb(
    cell_id: 2 head: "soft,max" rank: 0 seed: 1 recipe: 3 state: CELL_STATE_FAILED failure: "said \"no\"")pb");
  EXPECT_EQ(RowsCsv({done, failed}),
            "cell_id,head,head_index,rank,seed,recipe,state,train_error,test_error,"
            "train_exact_accuracy,"
            "train_position_accuracy,final_loss,steps,first_exact_step,final_test_loss,wall_seconds,"
            "device,"
            "worker_id,attempt,finished_unix_ms,cached,failure\n"
            "1,kernel/elu1,0,4,0,0,DONE,0.1,0.5,0.9,0.30000000000000004,1e-05,10,10,,2,cpu,,0,,true,\n"
            "2,\"soft,max\",0,,1,3,FAILED,,,,,,,,,,,,0,,false,\"said \"\"no\"\"\"\n");
}

TEST(ShortestDoubleTest, RoundTrips) {
  EXPECT_EQ(ShortestDouble(0.1), "0.1");
  EXPECT_EQ(ShortestDouble(1.0 / 3), "0.3333333333333333");
  EXPECT_EQ(ShortestDouble(0), "0");
  EXPECT_EQ(ShortestDouble(1e300), "1e+300");
}

TEST(SummaryViewTest, TransitionsBoundsAndGroups) {
  const auto reply = Parse<v1::QueryResultsResponse>(R"pb(
    facts { train_sequences: 36 rank_lower_bound: 6 rank_upper_bound: 24 }
    groups { head: "kernel/elu1" head_index: 0 rank: 1 n: 3 expected: 3
             train_error { mean: 0.5 ci95: 0.1 std: 0.04 min: 0.45 max: 0.55 } exact_seeds: 0 }
    groups { head: "kernel/elu1" head_index: 0 rank: 64 n: 2 expected: 3 missing_seeds: 2
             train_error { mean: 0 } exact_seeds: 2 }
    groups { head: "softmax" head_index: 1 rank: 0 n: 0 expected: 3 missing_seeds: 0
             missing_seeds: 1 missing_seeds: 2 }
    heads { head: "kernel/elu1" head_index: 0 has_rank: true transition_defined: true
            transition_rank: 64 reason: "rank 64: exact on 2/2 seeds" }
    heads { head: "softmax" head_index: 1 has_rank: false reason: "no seed done" })pb");
  const Json v = SummaryView(reply);
  EXPECT_EQ(v["facts"]["rank_lower_bound"], 6);
  EXPECT_EQ(v["facts"]["rank_upper_bound"], 24);
  ASSERT_EQ(v["heads"].size(), 2u);
  const Json& kernel = v["heads"][0];
  EXPECT_EQ(kernel["transition_rank"], 64);
  EXPECT_TRUE(kernel["test_transition_rank"].is_null());
  ASSERT_EQ(kernel["groups"].size(), 2u);
  EXPECT_EQ(kernel["groups"][0]["train_error"].dump(),
            R"({"mean":0.5,"ci95":0.1,"std":0.04,"min":0.45,"max":0.55})");
  EXPECT_TRUE(kernel["groups"][0]["test_error"].is_null());
  EXPECT_EQ(kernel["groups"][1]["missing_seeds"].dump(), "[2]");
  const Json& softmax = v["heads"][1];
  EXPECT_TRUE(softmax["transition_rank"].is_null());
  ASSERT_EQ(softmax["groups"].size(), 1u);
  EXPECT_TRUE(softmax["groups"][0]["rank"].is_null());
  EXPECT_TRUE(softmax["groups"][0]["train_error"].is_null());
  EXPECT_EQ(softmax["groups"][0]["missing_seeds"].dump(), "[0,1,2]");
}

TEST(SummaryViewTest, GroupsCarryTheirRecipe) {
  const auto reply = Parse<v1::QueryResultsResponse>(R"pb(
    groups { head: "kernel/elu1" head_index: 0 rank: 4 recipe: 0 n: 1 expected: 1 }
    groups { head: "kernel/elu1" head_index: 0 rank: 4 recipe: 1 n: 1 expected: 1 }
    heads { head: "kernel/elu1" head_index: 0 has_rank: true }
    recipe_labels { key: 0 value: "lr=0.01" }
    recipe_labels { key: 1 value: "lr=0.003" })pb");
  const Json v = SummaryView(reply);
  const Json& groups = v["heads"][0]["groups"];
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0]["recipe"], 0);
  EXPECT_EQ(groups[0]["recipe_label"], "lr=0.01");
  EXPECT_EQ(groups[1]["recipe"], 1);
  EXPECT_EQ(groups[1]["recipe_label"], "lr=0.003");
}

TEST(SummaryViewTest, NoFactsAndNoBounds) {
  EXPECT_EQ(SummaryView(v1::QueryResultsResponse()).dump(), R"({"facts":null,"heads":[]})");
  const auto reply = Parse<v1::QueryResultsResponse>("facts { train_sequences: 64 }");
  const Json v = SummaryView(reply);
  EXPECT_TRUE(v["facts"]["rank_lower_bound"].is_null());
  EXPECT_TRUE(v["facts"]["rank_upper_bound"].is_null());
}

TEST(WorkerViewTest, Fields) {
  const auto w = Parse<v1::WorkerInfo>(R"pb(
    worker_id: "w1" hostname: "box" device: "cuda" device_name: "NVIDIA H200" slots: 4
    memory_bytes: 1024 version { build_id: "0.1.0+abc" torch_version: "1.13.1" cuda_version: "12.1" }
    registered_unix_ms: 1000 last_seen_unix_ms: 5000 leased_cells: 2 completed_cells: 17 alive: true)pb");
  EXPECT_EQ(WorkerView(w, 7500).dump(),
            R"({"id":"w1","hostname":"box","device":"cuda","device_name":"NVIDIA H200",)"
            R"("memory_bytes":1024,"slots":4,"version":{"build_id":"0.1.0+abc","torch":"1.13.1",)"
            R"("cuda":"12.1"},"registered_unix_ms":1000,"last_seen_unix_ms":5000,)"
            R"("last_seen_ago_seconds":2.5,"alive":true,"leased_cells":2,"completed_cells":17,)"
            R"("quarantined_unix_ms":null,"token_held_by":null})");
}

// The quarantine's mark: on the worker itself, or on its token.
TEST(WorkerViewTest, QuarantineMarks) {
  const auto held = Parse<v1::WorkerInfo>(R"pb(worker_id: "w1" quarantined_unix_ms: 6000)pb");
  EXPECT_EQ(WorkerView(held, 7500)["quarantined_unix_ms"], 6000);
  EXPECT_TRUE(WorkerView(held, 7500)["token_held_by"].is_null());
  const auto by_token = Parse<v1::WorkerInfo>(R"pb(worker_id: "w2" token_held_by: "w1")pb");
  EXPECT_TRUE(WorkerView(by_token, 7500)["quarantined_unix_ms"].is_null());
  EXPECT_EQ(WorkerView(by_token, 7500)["token_held_by"], "w1");
}

}  // namespace
}  // namespace ranksweep::client::ui
