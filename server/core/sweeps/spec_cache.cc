#include "server/core/sweeps/spec_cache.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/spec/result_validation.h"
#include "common/spec/spec_json.h"
#include "common/status_macros.h"

namespace ranksweep::server {

absl::StatusOr<std::shared_ptr<const SweepSpec>> SpecCache::Get(Connection& c,
                                                                const std::string& sweep_id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = specs_.find(sweep_id);
    if (it != specs_.end()) return it->second;
  }
  ASSIGN_OR_RETURN(Statement q, c.Prepare("SELECT spec_json FROM sweeps WHERE id = :id"));
  q.Bind(":id", sweep_id);
  ASSIGN_OR_RETURN(bool row, q.Step());
  if (!row) return absl::NotFoundError(absl::StrCat("no sweep ", Clip(sweep_id)));
  absl::StatusOr<SweepSpec> spec = SweepSpecFromJson(q.ColumnText(0));
  if (!spec.ok()) {
    return absl::DataLossError(
        absl::StrCat("sweep ", sweep_id, ": stored spec does not parse: ", spec.status().message()));
  }
  return Insert(sweep_id, std::make_shared<const SweepSpec>(*std::move(spec)));
}

void SpecCache::Put(const std::string& sweep_id, const SweepSpec& spec) {
  Insert(sweep_id, std::make_shared<const SweepSpec>(spec));
}

std::shared_ptr<const SweepSpec> SpecCache::Insert(const std::string& sweep_id,
                                                   std::shared_ptr<const SweepSpec> spec) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = specs_.find(sweep_id);
  if (it != specs_.end()) return it->second;
  if (specs_.size() >= kMaxSpecs) specs_.erase(specs_.begin());
  return specs_.emplace(sweep_id, std::move(spec)).first->second;
}

}  // namespace ranksweep::server
