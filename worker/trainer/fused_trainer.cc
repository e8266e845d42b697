#include "worker/trainer/fused_trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/trainer/rng.h"

namespace ranksweep::trainer {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Tokens [B, N, m] as 0/1 floats and targets [B, N] as floats, on `device`.
struct SplitTensors {
  torch::Tensor tokens;
  torch::Tensor targets;
};

SplitTensors ToTensors(const Split& split, int m, int n, const torch::Device& device) {
  const int64_t b = split.size;
  torch::Tensor x = torch::empty({b, n, m}, torch::kFloat32);
  float* px = x.data_ptr<float>();
  for (int64_t i = 0; i < b * n; ++i) {
    const uint64_t tok = split.tokens[i];
    for (int k = 0; k < m; ++k) *px++ = static_cast<float>((tok >> k) & 1);
  }
  torch::Tensor t = torch::empty({b, n}, torch::kFloat32);
  float* pt = t.data_ptr<float>();
  for (int64_t i = 0; i < b * n; ++i) pt[i] = static_cast<float>(split.targets[i]);
  return {x.to(device), t.to(device)};
}

// 1 at scored positions, as [N] floats.
torch::Tensor ScoredMask(const Dataset& data, const torch::Device& device) {
  torch::Tensor mask = torch::zeros({data.seq_len}, torch::kFloat32);
  if (data.final_query_only) {
    mask[data.seq_len - 1] = 1.0f;
  } else {
    mask.fill_(1.0f);
  }
  return mask.to(device);
}

// Per-element loss of readouts out [S, B, N, K] against targets [.., B, N].
torch::Tensor ElementLoss(const torch::Tensor& out, const torch::Tensor& targets, LossKind loss) {
  if (out.size(-1) == 1) {
    torch::Tensor d = out.squeeze(-1) - targets;
    return d * d;
  }
  torch::Tensor logp = torch::log_softmax(out, -1);
  torch::Tensor idx = targets.to(torch::kLong).unsqueeze(-1).expand({out.size(0), out.size(1),
                                                                     out.size(2), 1});
  (void)loss;
  return -logp.gather(-1, idx).squeeze(-1);
}

// Adam over stacked [S, ...] parameters with a per-seed update mask: frozen
// seeds keep their parameters and moments exactly. Same update rule as
// torch::optim::Adam (L2 weight decay added to the gradient, eps outside the
// square root); all active seeds share the step count, as in their
// single-seed runs.
class FusedAdam {
 public:
  FusedAdam(std::vector<torch::Tensor> params, const TrainSpec& spec)
      : params_(std::move(params)), spec_(spec) {
    for (const auto& p : params_) {
      exp_avg_.push_back(torch::zeros_like(p));
      exp_avg_sq_.push_back(torch::zeros_like(p));
    }
  }

  void ZeroGrad() {
    for (auto& p : params_) {
      if (p.grad().defined()) p.mutable_grad().zero_();
    }
  }

  // active: [S] floats, 1 = update this seed.
  void Step(const torch::Tensor& active) {
    torch::NoGradGuard no_grad;
    ++step_;
    const double bc1 = 1.0 - std::pow(spec_.beta1, step_);
    const double bc2 = 1.0 - std::pow(spec_.beta2, step_);
    for (size_t i = 0; i < params_.size(); ++i) {
      torch::Tensor& p = params_[i];
      if (!p.grad().defined()) continue;
      std::vector<int64_t> shape(p.dim(), 1);
      shape[0] = p.size(0);
      torch::Tensor mask = active.view(shape);
      torch::Tensor g = p.grad();
      if (spec_.weight_decay != 0) g = g + spec_.weight_decay * p;
      exp_avg_[i].add_((g - exp_avg_[i]) * mask, 1.0 - spec_.beta1);
      exp_avg_sq_[i].add_((g * g - exp_avg_sq_[i]) * mask, 1.0 - spec_.beta2);
      torch::Tensor denom = (exp_avg_sq_[i] / bc2).sqrt() + kEps;
      p.sub_(exp_avg_[i] / denom * mask, spec_.lr / bc1);
    }
  }

 private:
  static constexpr double kEps = 1e-8;
  std::vector<torch::Tensor> params_;
  std::vector<torch::Tensor> exp_avg_, exp_avg_sq_;
  TrainSpec spec_;
  int64_t step_ = 0;
};

// Each seed's minibatch order: its own stream, reshuffled every epoch; the
// last partial batch of an epoch is dropped so all seeds share one shape.
class BatchOrder {
 public:
  BatchOrder(const std::vector<uint64_t>& seeds, int64_t size, int64_t batch)
      : size_(size), batch_(batch), cursor_(seeds.size(), size) {
    for (uint64_t s : seeds) rngs_.push_back(Rng::ForStream(s, kStreamBatches));
    perms_.assign(seeds.size(), std::vector<int64_t>(size));
  }

  // Next batch indices of every seed as [S, batch]; frozen seeds advance
  // too, which does not matter since their updates are masked.
  torch::Tensor Next() {
    const int64_t s_count = static_cast<int64_t>(rngs_.size());
    torch::Tensor idx = torch::empty({s_count, batch_}, torch::kLong);
    int64_t* p = idx.data_ptr<int64_t>();
    for (int64_t s = 0; s < s_count; ++s) {
      if (cursor_[s] + batch_ > size_) {
        for (int64_t i = 0; i < size_; ++i) perms_[s][i] = i;
        rngs_[s].Shuffle(perms_[s]);
        cursor_[s] = 0;
      }
      std::copy_n(perms_[s].begin() + cursor_[s], batch_, p + s * batch_);
      cursor_[s] += batch_;
    }
    return idx;
  }

 private:
  int64_t size_, batch_;
  std::vector<Rng> rngs_;
  std::vector<std::vector<int64_t>> perms_;
  std::vector<int64_t> cursor_;
};

}  // namespace

std::vector<SplitMetrics> EvaluateSplit(AttentionHeadImpl& head, const Dataset& data,
                                        const Split& split, LossKind loss,
                                        const torch::Device& device,
                                        std::vector<double>* loss_out) {
  const int64_t s_count = head.num_seeds();
  std::vector<SplitMetrics> metrics(s_count);
  if (loss_out) loss_out->assign(s_count, 0.0);
  if (split.size == 0) return metrics;
  torch::NoGradGuard no_grad;
  const int n = data.seq_len, m = data.m;
  const SplitTensors st = ToTensors(split, m, n, device);
  const torch::Tensor scored = ScoredMask(data, device);
  const int64_t n_scored = data.final_query_only ? 1 : n;
  // Chunk so the widest intermediate (features or scores) stays ~16M floats.
  const HeadConfig& c = head.config();
  const int64_t per_seq =
      s_count * n * (static_cast<int64_t>(c.num_heads) * std::max(c.rank, c.m) * 2 + n * n + m);
  const int64_t chunk = std::max<int64_t>(1, (int64_t{1} << 24) / std::max<int64_t>(per_seq, 1));
  auto opts = torch::TensorOptions().dtype(torch::kFloat32).device(device);
  torch::Tensor pos_right = torch::zeros({s_count}, opts);
  torch::Tensor seq_right = torch::zeros({s_count}, opts);
  torch::Tensor max_abs = torch::zeros({s_count}, opts);
  torch::Tensor loss_sum = torch::zeros({s_count}, torch::TensorOptions().dtype(torch::kFloat64).device(device));
  for (int64_t start = 0; start < split.size; start += chunk) {
    const int64_t len = std::min(chunk, split.size - start);
    torch::Tensor x = st.tokens.narrow(0, start, len).unsqueeze(0).expand({s_count, len, n, m});
    torch::Tensor t = st.targets.narrow(0, start, len).unsqueeze(0);  // [1, len, N]
    torch::Tensor out = head.forward(x);                               // [S, len, N, K]
    torch::Tensor value, pred;
    if (out.size(-1) == 1) {
      value = out.squeeze(-1);
      pred = torch::round(value);
    } else {
      torch::Tensor probs = torch::softmax(out, -1);
      value = (probs * torch::arange(out.size(-1), opts)).sum(-1);
      pred = out.argmax(-1).to(torch::kFloat32);
    }
    torch::Tensor right = (pred == t).to(torch::kFloat32);             // [S, len, N]
    pos_right += (right * scored).sum({1, 2});
    // A sequence is exact when every scored position is right.
    seq_right += torch::maximum(right, 1.0f - scored).amin(-1).sum(-1);
    max_abs = torch::maximum(max_abs, ((value - t).abs() * scored).amax({1, 2}));
    loss_sum += (ElementLoss(out, t, loss) * scored).sum({1, 2}).to(torch::kFloat64);
  }
  const torch::Tensor pos_cpu = pos_right.cpu(), seq_cpu = seq_right.cpu(),
                      abs_cpu = max_abs.cpu(), loss_cpu = loss_sum.cpu();
  for (int64_t s = 0; s < s_count; ++s) {
    SplitMetrics& mt = metrics[s];
    mt.sequences = split.size;
    mt.position_accuracy =
        pos_cpu[s].item<float>() / static_cast<double>(split.size * n_scored);
    mt.exact_accuracy = seq_cpu[s].item<float>() / static_cast<double>(split.size);
    mt.error = 1.0 - mt.exact_accuracy;
    mt.max_abs_error = abs_cpu[s].item<float>();
    if (loss_out) {
      (*loss_out)[s] = loss_cpu[s].item<double>() / static_cast<double>(split.size * n_scored);
    }
  }
  return metrics;
}

absl::StatusOr<std::vector<SeedResult>> TrainSeeds(const TaskSpec& spec, const Dataset& data,
                                                   const torch::Device& device,
                                                   const RunOptions& options) {
  const Clock::time_point start = Clock::now();
  const int64_t s_count = static_cast<int64_t>(spec.seeds.size());
  const bool constructed = spec.head.construction != Construction::kNone;
  std::shared_ptr<AttentionHeadImpl> head;
  if (constructed) {
    ASSIGN_OR_RETURN(head, MakeConstruction(spec.head, data.m, data.seq_len,
                                            static_cast<int>(s_count)));
  } else {
    head = MakeHead(MakeHeadConfig(spec), spec.seeds);
  }
  head->to(device);
  // Constructions always use the scalar readout.
  const LossKind loss = constructed ? LossKind::kMse : spec.train.loss;

  std::vector<int64_t> steps(s_count, 0);
  std::vector<double> stop_seconds(s_count, -1.0);
  const TrainSpec& ts = spec.train;
  if (!constructed && ts.max_steps > 0) {
    head->train();
    const int n = data.seq_len;
    const SplitTensors train = ToTensors(data.train, data.m, n, device);
    const torch::Tensor scored = ScoredMask(data, device);
    const int64_t n_scored = data.final_query_only ? 1 : n;
    const int64_t b_total = data.train.size;
    const bool full_batch = ts.batch_size == 0 || ts.batch_size >= b_total;
    const int64_t batch = full_batch ? b_total : ts.batch_size;
    torch::Tensor full_x, full_t;
    if (full_batch) {
      full_x = train.tokens.unsqueeze(0).expand({s_count, b_total, n, data.m}).contiguous();
      full_t = train.targets.unsqueeze(0);
    }
    BatchOrder order(spec.seeds, b_total, batch);
    FusedAdam adam(head->parameters(), ts);
    std::vector<char> active(s_count, 1);
    std::vector<int> streak(s_count, 0);
    auto upload_active = [&]() {
      torch::Tensor a = torch::empty({s_count}, torch::kFloat32);
      for (int64_t s = 0; s < s_count; ++s) a[s] = active[s] ? 1.0f : 0.0f;
      return a.to(device);
    };
    torch::Tensor active_t = upload_active();
    int64_t n_active = s_count;
    for (int step = 0; step < ts.max_steps && n_active > 0; ++step) {
      torch::Tensor x, t;
      if (full_batch) {
        x = full_x;
        t = full_t;
      } else {
        torch::Tensor idx = order.Next().to(device).flatten();
        x = train.tokens.index_select(0, idx).view({s_count, batch, n, data.m});
        t = train.targets.index_select(0, idx).view({s_count, batch, n});
      }
      torch::Tensor out = head->forward(x);
      torch::Tensor per_seed =
          (ElementLoss(out, t, loss) * scored).sum({1, 2}) / static_cast<double>(batch * n_scored);
      adam.ZeroGrad();
      (per_seed * active_t).sum().backward();
      adam.Step(active_t);
      for (int64_t s = 0; s < s_count; ++s) steps[s] += active[s];

      const bool last = step + 1 == ts.max_steps;
      if ((step + 1) % ts.eval_every != 0 && !last) continue;
      // The only host synchronization of the loop: every eval_every steps.
      head->eval();
      const std::vector<SplitMetrics> m =
          EvaluateSplit(*head, data, data.train, loss, device);
      head->train();
      bool changed = false;
      for (int64_t s = 0; s < s_count; ++s) {
        if (!active[s]) continue;
        streak[s] = m[s].error == 0.0 ? streak[s] + 1 : 0;
        if (ts.early_stop_evals > 0 && streak[s] >= ts.early_stop_evals) {
          active[s] = 0;
          stop_seconds[s] = SecondsSince(start);
          --n_active;
          changed = true;
        }
      }
      if (changed) active_t = upload_active();
      if (options.on_progress) options.on_progress(step + 1);
      if (options.should_stop && options.should_stop()) {
        return absl::CancelledError(absl::StrCat("stopped after ", step + 1, " steps"));
      }
    }
  }

  head->eval();
  std::vector<double> final_loss;
  const std::vector<SplitMetrics> train_m =
      EvaluateSplit(*head, data, data.train, loss, device, &final_loss);
  const std::vector<SplitMetrics> test_m = EvaluateSplit(*head, data, data.test, loss, device);
  const double total = SecondsSince(start);
  std::vector<SeedResult> results(s_count);
  for (int64_t s = 0; s < s_count; ++s) {
    SeedResult& r = results[s];
    r.seed = spec.seeds[s];
    r.train = train_m[s];
    r.test = test_m[s];
    r.final_loss = final_loss[s];
    r.steps = steps[s];
    // A frozen seed reports the time until it froze.
    r.wall_seconds = stop_seconds[s] >= 0 ? stop_seconds[s] : total;
  }
  return results;
}

}  // namespace ranksweep::trainer
