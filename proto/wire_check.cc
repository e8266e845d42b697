#include "proto/wire_check.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/spec/spec.h"
#include "common/status_macros.h"

namespace ranksweep {
namespace {

// Wire numbers 1..K are the spec's values 0..K-1 in order (convert.h); 0
// means "the default". `name` gives the spec name of spec value i.
template <typename E>
absl::Status CheckEnum(const std::string& field, int number,
                       const google::protobuf::EnumDescriptor* d, const char* (*name)(E)) {
  if (number == 0 || (number > 0 && d->FindValueByNumber(number) != nullptr)) {
    return absl::OkStatus();
  }
  std::vector<std::string> names;
  for (int i = 0; i < d->value_count(); ++i) {
    const int n = d->value(i)->number();
    if (n > 0) names.push_back(name(static_cast<E>(n - 1)));
  }
  return absl::InvalidArgumentError(absl::StrCat(field, " must be one of ",
                                                 absl::StrJoin(names, ", "), "; got value ",
                                                 number));
}

absl::Status CheckDataset(const v1::DatasetSpec& d) {
  return CheckEnum<DatasetKind>("dataset.kind", d.kind(), v1::DatasetKind_descriptor(), Name);
}

absl::Status CheckHead(const v1::HeadSpec& h) {
  RETURN_IF_ERROR(CheckEnum<HeadKind>("head.kind", h.kind(), v1::HeadKind_descriptor(), Name));
  RETURN_IF_ERROR(CheckEnum<FeatureMap>("head.feature_map", h.feature_map(),
                                        v1::FeatureMap_descriptor(), Name));
  return CheckEnum<Construction>("head.construction", h.construction(),
                                 v1::Construction_descriptor(), Name);
}

absl::Status CheckTrain(const v1::TrainSpec& t) {
  RETURN_IF_ERROR(CheckEnum<LossKind>("train.loss", t.loss(), v1::LossKind_descriptor(), Name));
  RETURN_IF_ERROR(
      CheckEnum<LrSchedule>("train.schedule", t.schedule(), v1::LrSchedule_descriptor(), Name));
  if (t.early_stop_evals() < -1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "train.early_stop_evals must be -1 (never stop early), 0 (the default, 3) or 1..1000 "
        "on the wire, got ",
        t.early_stop_evals()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckWireSweepSpec(const v1::SweepSpec& p) {
  RETURN_IF_ERROR(CheckDataset(p.dataset()));
  for (int i = 0; i < p.heads_size(); ++i) {
    absl::Status s = CheckHead(p.heads(i));
    if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat("heads[", i, "]: ", s.message()));
  }
  RETURN_IF_ERROR(CheckTrain(p.train()));
  return CheckEnum<SweepMode>("mode", p.mode(), v1::SweepMode_descriptor(), Name);
}

absl::Status CheckWireTaskSpec(const v1::TaskSpec& p) {
  RETURN_IF_ERROR(CheckDataset(p.dataset()));
  RETURN_IF_ERROR(CheckHead(p.head()));
  return CheckTrain(p.train());
}

absl::Status CheckWireSeedResult(const v1::SeedResult& p) {
  const v1::Curve& c = p.curve();
  const int n = c.steps_size();
  auto check = [n](const char* list, int size) -> absl::Status {
    if (size == n) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat("result.curve.", list, " must have as many elements as result.curve.steps (",
                     n, "), got ", size));
  };
  // The optional metrics by name: a newer worker may send a metric this
  // coordinator does not know (it is ignored), but not without bound.
  if (p.metrics_size() > WireLimits::kMaxResultMetrics) {
    return absl::InvalidArgumentError(absl::StrCat("result.metrics must have at most ",
                                                   WireLimits::kMaxResultMetrics,
                                                   " entries, got ", p.metrics_size()));
  }
  for (const auto& [name, value] : p.metrics()) {
    if (name.size() > WireLimits::kMaxMetricNameLength) {
      return absl::InvalidArgumentError(
          absl::StrCat("result.metrics: a name must be at most ", WireLimits::kMaxMetricNameLength,
                       " bytes, got ", name.size()));
    }
  }
  RETURN_IF_ERROR(check("loss", c.loss_size()));
  RETURN_IF_ERROR(check("train_error", c.train_error_size()));
  RETURN_IF_ERROR(check("train_position_accuracy", c.train_position_accuracy_size()));
  const int test_n = c.has_test() ? n : 0;
  for (const auto& [list, size] : {std::pair<const char*, int>{"test_error", c.test_error_size()},
                                   {"test_position_accuracy", c.test_position_accuracy_size()}}) {
    if (size != test_n) {
      return absl::InvalidArgumentError(absl::StrCat(
          "result.curve.", list, " must have ", test_n, " elements (",
          c.has_test() ? "one per element of result.curve.steps" : "result.curve.has_test is false",
          "), got ", size));
    }
  }
  return absl::OkStatus();
}

}  // namespace ranksweep
