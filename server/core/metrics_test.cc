#include "server/core/metrics.h"

#include <cmath>
#include <limits>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ranksweep::server {
namespace {

using ::testing::HasSubstr;

TEST(MetricsTest, RendersCountersAndGaugesInThePrometheusTextFormat) {
  MetricsRegistry r;
  r.DefineCounter("rs_results_total", "Results stored.");
  r.DefineGauge("rs_cells", "Cells by state.");
  r.Add("rs_results_total", {}, 3);
  r.Add("rs_results_total", {}, 2);
  r.Set("rs_cells", {{"state", "pending"}}, 7);
  r.Set("rs_cells", {{"state", "done"}}, 12);
  EXPECT_EQ(r.Render(),
            "# HELP rs_results_total Results stored.\n"
            "# TYPE rs_results_total counter\n"
            "rs_results_total 5\n"
            "# HELP rs_cells Cells by state.\n"
            "# TYPE rs_cells gauge\n"
            "rs_cells{state=\"done\"} 12\n"
            "rs_cells{state=\"pending\"} 7\n");
}

TEST(MetricsTest, SeriesAreKeyedBySortedLabelsAndEscaped) {
  MetricsRegistry r;
  r.DefineCounter("rs_rpcs_total", "Calls.\nBy method and \\code.");
  r.Add("rs_rpcs_total", {{"method", "/a.B/C"}, {"code", "OK"}});
  r.Add("rs_rpcs_total", {{"code", "OK"}, {"method", "/a.B/C"}});  // the same series
  r.Add("rs_rpcs_total", {{"code", "say \"hi\"\\\n"}, {"method", "m"}});
  r.Add("rs_rpcs_total", {{"code", "OK"}, {"method", "m"}}, -1);  // counters never go down
  EXPECT_EQ(r.Render(),
            "# HELP rs_rpcs_total Calls.\\nBy method and \\\\code.\n"
            "# TYPE rs_rpcs_total counter\n"
            "rs_rpcs_total{code=\"OK\",method=\"/a.B/C\"} 2\n"
            "rs_rpcs_total{code=\"say \\\"hi\\\"\\\\\\n\",method=\"m\"} 1\n");
  EXPECT_EQ(r.Value("rs_rpcs_total", {{"method", "/a.B/C"}, {"code", "OK"}}), 2);
  EXPECT_EQ(r.Value("rs_rpcs_total", {{"method", "nope"}}), 0);
}

TEST(MetricsTest, HistogramBucketsAreCumulativeWithSumAndCount) {
  MetricsRegistry r;
  r.DefineHistogram("rs_commit_seconds", "Commit time.", {0.01, 0.1, 1});
  for (double v : {0.005, 0.01, 0.05, 0.5, 3.0}) r.Observe("rs_commit_seconds", {}, v);
  EXPECT_EQ(r.Render(),
            "# HELP rs_commit_seconds Commit time.\n"
            "# TYPE rs_commit_seconds histogram\n"
            "rs_commit_seconds_bucket{le=\"0.01\"} 2\n"
            "rs_commit_seconds_bucket{le=\"0.1\"} 3\n"
            "rs_commit_seconds_bucket{le=\"1\"} 4\n"
            "rs_commit_seconds_bucket{le=\"+Inf\"} 5\n"
            "rs_commit_seconds_sum 3.565\n"
            "rs_commit_seconds_count 5\n");
}

TEST(MetricsTest, CollectorsRefreshGaugesBeforeEachRender) {
  MetricsRegistry r;
  r.DefineGauge("rs_workers_alive", "Workers.");
  int calls = 0;
  r.AddCollector([&calls](MetricsRegistry* m) {
    ++calls;
    m->ClearGauge("rs_workers_alive");
    if (calls == 1) m->Set("rs_workers_alive", {{"device", "cuda"}}, 2);
    m->Set("rs_workers_alive", {{"device", "cpu"}}, calls);
  });
  EXPECT_THAT(r.Render(), HasSubstr("rs_workers_alive{device=\"cuda\"} 2\n"));
  const std::string second = r.Render();
  EXPECT_THAT(second, HasSubstr("rs_workers_alive{device=\"cpu\"} 2\n"));
  EXPECT_THAT(second, ::testing::Not(HasSubstr("cuda")));  // gone since
  EXPECT_EQ(calls, 2);
}

TEST(MetricsTest, UndefinedNamesAndWrongKindsRecordNothing) {
  MetricsRegistry r;
  r.DefineGauge("rs_g", "A gauge.");
  r.Add("rs_g", {}, 1);        // not a counter
  r.Observe("rs_g", {}, 1);    // not a histogram
  r.Set("rs_missing", {}, 1);  // never defined
  r.Set("rs_g", {}, std::numeric_limits<double>::infinity());
  EXPECT_EQ(r.Render(), "# HELP rs_g A gauge.\n# TYPE rs_g gauge\nrs_g +Inf\n");
  r.Set("rs_g", {}, 0.1 + 0.2);
  EXPECT_THAT(r.Render(), HasSubstr("rs_g 0.30000000000000004\n"));
}

TEST(MetricsTest, TheCoordinatorFamiliesAreAllDefined) {
  MetricsRegistry r;
  DefineCoordinatorMetrics(&r);
  const std::string text = r.Render();
  for (const char* family :
       {"ranksweep_cells gauge", "ranksweep_leases_granted_total counter",
        "ranksweep_leases_expired_total counter", "ranksweep_leases_lost_total counter",
        "ranksweep_results_accepted_total counter", "ranksweep_results_rejected_total counter",
        "ranksweep_workers_alive gauge", "ranksweep_store_commit_seconds histogram",
        "ranksweep_rpcs_total counter", "ranksweep_query_cache_hits_total counter",
        "ranksweep_query_cache_misses_total counter", "ranksweep_query_cache_bytes gauge"}) {
    EXPECT_THAT(text, HasSubstr(std::string("# TYPE ") + family + "\n"));
  }
  EXPECT_THAT(text, HasSubstr("\nranksweep_results_accepted_total 0\n"));
  EXPECT_THAT(text, HasSubstr("\nranksweep_leases_granted_total 0\n"));
  EXPECT_THAT(text, HasSubstr("\nranksweep_query_cache_hits_total 0\n"));
  EXPECT_THAT(text, HasSubstr("\nranksweep_query_cache_bytes 0\n"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("\nranksweep_rpcs_total ")));  // labelled only
}

// What an operator looks for first: which build runs, how many sweeps are
// in each state, how long calls take, and a sample for every counter
// before anything was counted (a refusal counter that appears only with the
// first refusal has no rate() until then).
TEST(MetricsTest, BuildInfoSweepsLatencyAndAZeroSampleForEveryCounter) {
  MetricsRegistry r;
  DefineCoordinatorMetrics(&r, "0.9.0+1a2b3c4d5e6f.0123456789ab");
  const std::string text = r.Render();
  EXPECT_THAT(text, HasSubstr("# TYPE ranksweep_build_info gauge\n"
                              "ranksweep_build_info{build_id=\"0.9.0+1a2b3c4d5e6f.0123456789ab\","
                              "version=\"0.9.0\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE ranksweep_sweeps gauge\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE ranksweep_rpc_duration_seconds histogram\n"));
  // Each refusal code at 0; OK is no refusal.
  ASSERT_EQ(RejectionReasons().size(), 16u);
  for (const std::string& reason : RejectionReasons()) {
    EXPECT_THAT(text, HasSubstr("\nranksweep_results_rejected_total{reason=\"" + reason +
                                "\"} 0\n"));
  }
  EXPECT_THAT(text, ::testing::Not(HasSubstr("reason=\"OK\"")));
  // Every counter family but rpcs_total (whose methods the interceptor
  // seeds) has a sample.
  for (const char* name : {"ranksweep_leases_granted_total", "ranksweep_leases_expired_total",
                           "ranksweep_leases_lost_total", "ranksweep_results_accepted_total",
                           "ranksweep_results_rejected_total"}) {
    EXPECT_TRUE(text.find(std::string("\n") + name + " 0\n") != std::string::npos ||
                text.find(std::string("\n") + name + "{") != std::string::npos)
        << name;
  }
  // Without a build id, the label says so.
  MetricsRegistry plain;
  DefineCoordinatorMetrics(&plain);
  EXPECT_THAT(plain.Render(),
              HasSubstr("ranksweep_build_info{build_id=\"unknown\",version=\"unknown\"} 1\n"));
}

TEST(MetricsTest, BucketBoundsAndFractionsArePlainDecimals) {
  MetricsRegistry r;
  r.DefineHistogram("rs_h", "H.", {0.0005});
  r.Observe("rs_h", {}, 0.0001);
  EXPECT_THAT(r.Render(), HasSubstr("rs_h_bucket{le=\"0.0005\"} 1\nrs_h_bucket{le=\"+Inf\"} 1\n"
                                    "rs_h_sum 0.0001\n"));
}

TEST(MetricsTest, AFamilyHoldsAtMostItsBoundOfSeriesAndCountsTheRest) {
  MetricsRegistry r;
  r.DefineCounter("rs_rpcs_total", "Calls.");
  r.DefineGauge("rs_g", "A gauge.");
  r.DefineHistogram("rs_h", "A histogram.", {1});
  const size_t n = MetricsRegistry::kMaxSeriesPerFamily;
  for (size_t i = 0; i < n + 500; ++i) {
    const std::string v = std::to_string(i);
    r.Add("rs_rpcs_total", {{"method", v}});
    r.Set("rs_g", {{"k", v}}, 1);
    r.Observe("rs_h", {{"k", v}}, 0.5);
  }
  EXPECT_EQ(r.series(), 3 * n);
  EXPECT_EQ(r.dropped_series(), 3 * 500);
  // Series that exist go on counting; new ones past the bound do not appear.
  r.Add("rs_rpcs_total", {{"method", "0"}}, 4);
  EXPECT_EQ(r.Value("rs_rpcs_total", {{"method", "0"}}), 5);
  EXPECT_EQ(r.Value("rs_rpcs_total", {{"method", std::to_string(n)}}), 0);
  EXPECT_EQ(r.series(), 3 * n);
}

TEST(MetricsTest, ASeriesCountsIntoTheSameSeriesAsItsNameAndLabels) {
  MetricsRegistry r;
  r.DefineCounter("rs_rpcs_total", "Calls.");
  r.DefineHistogram("rs_seconds", "Time.", {0.01, 1});
  MetricsRegistry::Series calls("rs_rpcs_total", {{"method", "/a.B/C"}, {"code", "OK"}});
  MetricsRegistry::Series time("rs_seconds", {{"method", "/a.B/C"}});
  // Nothing exists before first use: a histogram has no series until a
  // value is observed, as with Observe by name.
  EXPECT_EQ(r.series(), 0u);
  r.Add(calls);
  r.Add(calls, 2);
  r.Add(calls, -1);  // counters never go down
  r.Add("rs_rpcs_total", {{"code", "OK"}, {"method", "/a.B/C"}});  // the same series
  r.Observe(time, 0.5);
  r.Observe("rs_seconds", {{"method", "/a.B/C"}}, 2);
  EXPECT_EQ(r.Value("rs_rpcs_total", {{"method", "/a.B/C"}, {"code", "OK"}}), 4);
  EXPECT_EQ(r.series(), 2u);
  EXPECT_EQ(r.Render(),
            "# HELP rs_rpcs_total Calls.\n"
            "# TYPE rs_rpcs_total counter\n"
            "rs_rpcs_total{code=\"OK\",method=\"/a.B/C\"} 4\n"
            "# HELP rs_seconds Time.\n"
            "# TYPE rs_seconds histogram\n"
            "rs_seconds_bucket{method=\"/a.B/C\",le=\"0.01\"} 0\n"
            "rs_seconds_bucket{method=\"/a.B/C\",le=\"1\"} 1\n"
            "rs_seconds_bucket{method=\"/a.B/C\",le=\"+Inf\"} 2\n"
            "rs_seconds_sum{method=\"/a.B/C\"} 2.5\n"
            "rs_seconds_count{method=\"/a.B/C\"} 2\n");
}

TEST(MetricsTest, ASeriesOfAnUndefinedNameOrOfAnotherKindRecordsNothing) {
  MetricsRegistry r;
  r.DefineCounter("rs_total", "A counter.");
  r.DefineHistogram("rs_h", "A histogram.", {1});
  MetricsRegistry::Series missing("rs_missing_total", {});
  MetricsRegistry::Series counter("rs_total", {});
  MetricsRegistry::Series histogram("rs_h", {});
  r.Add(missing);
  r.Observe(counter, 0.5);  // not a histogram
  r.Add(histogram);         // not a counter
  EXPECT_EQ(r.series(), 0u);
  // Found as what it is, a series then refuses the other kind's call.
  r.Add(counter);
  r.Observe(counter, 0.5);
  r.Observe(histogram, 0.5);
  r.Add(histogram, 3);
  EXPECT_EQ(r.Value("rs_total", {}), 1);
  EXPECT_THAT(r.Render(), HasSubstr("rs_h_count 1\n"));
  EXPECT_EQ(r.series(), 2u);
}

TEST(MetricsTest, ASeriesPastAFullFamilysBoundIsDroppedAndCountedOnEachUse) {
  MetricsRegistry r;
  r.DefineCounter("rs_rpcs_total", "Calls.");
  const size_t n = MetricsRegistry::kMaxSeriesPerFamily;
  for (size_t i = 0; i < n; ++i) r.Add("rs_rpcs_total", {{"method", std::to_string(i)}});
  MetricsRegistry::Series late("rs_rpcs_total", {{"method", "late"}});
  r.Add(late);
  r.Add(late);
  EXPECT_EQ(r.dropped_series(), 2);
  EXPECT_EQ(r.Value("rs_rpcs_total", {{"method", "late"}}), 0);
  EXPECT_EQ(r.series(), n);
}

}  // namespace
}  // namespace ranksweep::server
