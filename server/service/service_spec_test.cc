// Spec text and ValidateSweep through the real gRPC adapter: a client sends
// YAML or JSON as written and the coordinator reads it with the CLI's parser
// (common/spec/spec_file.h), so no client needs a parser of its own.
// ValidateSweep answers what SubmitSweep would, and stores nothing.
#include <string>

#include "common/spec/spec_file.h"
#include "common/spec/spec_json.h"
#include "server/service/service_test_fixture.h"

namespace ranksweep::server {
namespace {

constexpr char kYaml[] = R"(name: from-text
dataset: {kind: exhaustive, m: 2, seq_len: 3}
heads: [{kind: kernel}, {kind: softmax}]
ranks: [1, 2, 4]
seed_count: 3
train: {lr: [0.01, 0.003], max_steps: 200}
)";

v1::SpecText Text(const std::string& text, const std::string& format = "",
                  const std::string& source = "") {
  v1::SpecText t;
  t.set_text(text);
  t.set_format(format);
  t.set_source(source);
  return t;
}

class ServiceSpecTest : public ServiceTest {
 protected:
  grpc::Status Validate(const v1::SpecText& text, v1::ValidateSweepResponse* out) {
    grpc::ClientContext ctx;
    v1::ValidateSweepRequest req;
    *req.mutable_spec_text() = text;
    return sweep_stub_->ValidateSweep(&ctx, req, out);
  }
  size_t Sweeps() { return coordinator_->ListSweeps(std::nullopt, 0)->size(); }
};

// (3 kernel ranks + softmax) x 3 seeds x 2 recipes = 24 cells; the spec comes
// back with every default filled in, as `submit --dry-run` prints it.
TEST_F(ServiceSpecTest, ValidateReadsYamlAndCountsCellsWithoutStoringAnything) {
  v1::ValidateSweepResponse out;
  grpc::Status s = Validate(Text(kYaml, "yaml", "sweep.yaml"), &out);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(out.cells(), 24);
  EXPECT_EQ(out.recipes(), 2);
  EXPECT_EQ(out.train_sequences(), 64);  // 2^(m * seq_len)
  EXPECT_EQ(out.test_sequences(), 0);
  EXPECT_GT(out.task_memory_bytes(), 0);
  EXPECT_EQ(out.largest_task(), "kernel/elu1 at rank 4 with lr=0.01, 3 seeds");
  EXPECT_EQ(out.warnings_size(), 0);
  EXPECT_EQ(out.spec().name(), "from-text");
  EXPECT_EQ(out.spec().train().max_steps(), 200);
  absl::StatusOr<SweepSpec> parsed = ParseSweepSpecText(kYaml, SpecFormat::kYaml, "x");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(out.spec_json(), SweepSpecToJson(*parsed, 2));
  // The same spec as JSON, its format guessed, reads the same.
  v1::ValidateSweepResponse json;
  ASSERT_TRUE(Validate(Text(SweepSpecToJson(*parsed)), &json).ok());
  EXPECT_EQ(json.spec_json(), out.spec_json());
  EXPECT_EQ(Sweeps(), 0u);
}

TEST_F(ServiceSpecTest, ValidateFailsWithTheMessageSubmitWouldGive) {
  struct Case {
    v1::SpecText text;
    std::string message;
  };
  const Case cases[] = {
      {Text("name: a\ndataset: {m: 0}\nheads: [{kind: softmax}]\nseed_count: 1\n", "yaml"),
       "dataset.m must be in 1..64, got 0"},
      {Text(R"({"name": "a", "train": {"lrr": 1}})", "json", "a.json"),
       "a.json: unknown field \"train.lrr\""},
      {Text("name: [a\n", "yaml", "s.yaml"), ""},  // a YAML syntax error: checked below
      {Text("name: a\n", "toml"),
       "spec_text.format must be one of json, yaml or empty (guess); got \"toml\""},
      {Text(std::string(kMaxSpecTextBytes + 1, ' ')),
       "spec_text.text must be at most 1048576 bytes, got 1048577"},
      {Text("name: a\n", "", std::string(300, 's')),
       "spec_text.source must be at most 256 bytes, got 300"},
  };
  for (const Case& c : cases) {
    v1::ValidateSweepResponse out;
    grpc::Status s = Validate(c.text, &out);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.message;
    if (!c.message.empty()) {
      EXPECT_EQ(s.error_message(), c.message);
    } else {
      EXPECT_THAT(s.error_message(), ::testing::StartsWith("s.yaml:2:1: "));
    }
    // SubmitSweep answers the same status for the same text.
    grpc::ClientContext ctx;
    v1::SubmitSweepRequest req;
    *req.mutable_spec_text() = c.text;
    v1::SubmitSweepResponse resp;
    grpc::Status submitted = sweep_stub_->SubmitSweep(&ctx, req, &resp);
    EXPECT_EQ(submitted.error_code(), s.error_code());
    EXPECT_EQ(submitted.error_message(), s.error_message());
  }
  // At the limit itself the text is read.
  std::string padded = kYaml;
  padded.resize(kMaxSpecTextBytes, ' ');
  v1::ValidateSweepResponse at_limit;
  grpc::Status s = Validate(Text(padded, "yaml"), &at_limit);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(at_limit.cells(), 24);
  EXPECT_EQ(Sweeps(), 0u);
}

// A SweepSpec message validates too, and the warnings `submit` prints come
// back: the cross-entropy loss with a trained kernel head.
TEST_F(ServiceSpecTest, ValidateTakesASweepSpecAndReturnsTheWarnings) {
  grpc::ClientContext ctx;
  v1::ValidateSweepRequest req;
  *req.mutable_spec() = Spec("ce");
  req.mutable_spec()->mutable_train()->set_loss(v1::LOSS_KIND_CROSS_ENTROPY);
  v1::ValidateSweepResponse out;
  grpc::Status s = sweep_stub_->ValidateSweep(&ctx, req, &out);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(out.cells(), 16);  // 3 ranks x 4 seeds + 4 softmax
  EXPECT_EQ(out.recipes(), 1);
  ASSERT_EQ(out.warnings_size(), 1);
  EXPECT_THAT(out.warnings(0), ::testing::StartsWith("train.loss ce: kernel/elu1 will be judged"));
  EXPECT_EQ(Sweeps(), 0u);
}

// Submitted as text, the sweep is the one ValidateSweep described, and
// GetSweep gives its spec back as the same JSON.
TEST_F(ServiceSpecTest, SubmitTakesSpecTextAndGetSweepReturnsItsJson) {
  v1::ValidateSweepResponse validated;
  ASSERT_TRUE(Validate(Text(kYaml), &validated).ok());
  grpc::ClientContext ctx;
  v1::SubmitSweepRequest req;
  *req.mutable_spec_text() = Text(kYaml);
  v1::SubmitSweepResponse submitted;
  grpc::Status s = sweep_stub_->SubmitSweep(&ctx, req, &submitted);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(submitted.cells(), 24);
  grpc::ClientContext ctx2;
  v1::GetSweepRequest get;
  get.set_sweep_id(submitted.sweep_id());
  v1::GetSweepResponse got;
  ASSERT_TRUE(sweep_stub_->GetSweep(&ctx2, get, &got).ok());
  EXPECT_EQ(got.sweep().name(), "from-text");
  EXPECT_EQ(got.spec_json(), validated.spec_json());
  EXPECT_EQ(Sweeps(), 1u);
}

}  // namespace
}  // namespace ranksweep::server
