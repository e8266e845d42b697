#include "worker/trainer/fused_trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <torch/version.h>

#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/spec/result_metrics.h"
#include "common/status_macros.h"
#include "worker/trainer/fused_adam.h"
#include "worker/trainer/rng.h"

// CUDA graphs of the training step need a CUDA build of LibTorch 2.x
// (at::cuda::CUDAGraph with autograd inside a capture). Not compiled, and
// never tried, on CPU-only builds such as Debian's LibTorch 1.13.
#if defined(RANKSWEEP_TORCH_CUDA) && TORCH_VERSION_MAJOR >= 2
#define RANKSWEEP_CUDA_GRAPHS 1
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace ranksweep::trainer {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The split's distinct tokens with the index of every position into them
// (heads.h, TokenIndex), and targets [B, N] as floats, on `device`.
struct SplitTensors {
  TokenIndex tokens;
  torch::Tensor targets;
};

SplitTensors ToTensors(const Split& split, int m, int n, const torch::Device& device) {
  const int64_t b = split.size;
  torch::Tensor t = torch::empty({b, n}, torch::kFloat32);
  float* pt = t.data_ptr<float>();
  for (int64_t i = 0; i < b * n; ++i) pt[i] = static_cast<float>(split.targets[i]);
  return {IndexTokens(split.tokens, b, n, m, device), t.to(device)};
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

// Runs the training step eagerly or, where RANKSWEEP_CUDA_GRAPHS is
// compiled in and the step's inputs are static, as a CUDA graph: a few
// eager warm-up steps, one capture (forward, backward, optimizer step), then
// one replay per step. Any error during capture falls back to eager steps
// for the rest of the run. Not thread-safe; one per training run.
class StepRunner {
 public:
  StepRunner(std::function<void()> step, bool use_graph)
      : step_(std::move(step)), use_graph_(use_graph) {}

  void Run() {
#ifdef RANKSWEEP_CUDA_GRAPHS
    if (use_graph_) {
      if (graph_ != nullptr) {
        graph_->replay();
        return;
      }
      if (++eager_steps_ > kWarmupSteps) {
        if (Capture()) {
          graph_->replay();  // a capture records the step; replay runs it
          return;
        }
        use_graph_ = false;
      }
    }
#endif
    step_();
  }

  bool graphed() const { return graph_ != nullptr; }

 private:
#ifdef RANKSWEEP_CUDA_GRAPHS
  static constexpr int kWarmupSteps = 3;
  bool Capture() {
    auto graph = std::make_unique<at::cuda::CUDAGraph>();
    bool begun = false;
    try {
      // The warm-up steps on this run's own stream, not the whole device:
      // other slots of the process keep training meanwhile.
      c10::cuda::getCurrentCUDAStream().synchronize();
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
      // Thread-local capture: only this thread is kept from calls that are
      // unsafe during a capture. In the default global mode another slot's
      // thread allocating or synchronizing while this one captures would
      // get an error, failing its task, and break this capture.
      graph->capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);
#else
      graph->capture_begin();  // LibTorch 2.0: global mode only
#endif
      begun = true;
      step_();
      graph->capture_end();
      graph_ = std::move(graph);
      return true;
    } catch (const std::exception&) {
      if (begun) {
        try {
          graph->capture_end();  // leave capture mode; the graph is dropped
        } catch (const std::exception&) {
        }
      }
      return false;
    }
  }
  std::unique_ptr<at::cuda::CUDAGraph> graph_;
  int eager_steps_ = 0;
#else
  std::nullptr_t graph_ = nullptr;
#endif
  std::function<void()> step_;
  bool use_graph_;
};

// CUDA graphs for this run: compiled in, a CUDA device, static inputs (full
// batch), and RANKSWEEP_CUDA_GRAPHS not set to 0.
bool UseCudaGraph(const torch::Device& device, bool full_batch) {
#ifdef RANKSWEEP_CUDA_GRAPHS
  const char* env = std::getenv("RANKSWEEP_CUDA_GRAPHS");
  return device.is_cuda() && full_batch && !(env != nullptr && std::string(env) == "0");
#else
  (void)device;
  (void)full_batch;
  return false;
#endif
}

// Each seed's minibatch order: its own stream, reshuffled every epoch; the
// last partial batch of an epoch is dropped so all seeds share one shape.
// `pinned` (for a CUDA device): each batch is written to page-locked memory,
// so that its copy to the device can be asynchronous.
class BatchOrder {
 public:
  BatchOrder(const std::vector<uint64_t>& seeds, int64_t size, int64_t batch, bool pinned)
      : size_(size), batch_(batch), pinned_(pinned), cursor_(seeds.size(), size) {
    for (uint64_t s : seeds) rngs_.push_back(Rng::ForStream(s, kStreamBatches));
    perms_.assign(seeds.size(), std::vector<int64_t>(size));
  }

  // Next batch indices of every seed as [S, batch]; frozen seeds advance
  // too, which does not matter since their updates are masked.
  torch::Tensor Next() {
    const int64_t s_count = static_cast<int64_t>(rngs_.size());
    torch::Tensor idx =
        torch::empty({s_count, batch_}, torch::TensorOptions().dtype(torch::kLong).pinned_memory(
                                             pinned_));
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
  bool pinned_;
  std::vector<Rng> rngs_;
  std::vector<std::vector<int64_t>> perms_;
  std::vector<int64_t> cursor_;
};

}  // namespace

namespace {

// EvaluateSplit on a split already on the device (`size` sequences).
std::vector<SplitMetrics> EvaluateTensors(AttentionHeadImpl& head, const Dataset& data,
                                          const SplitTensors& st, int64_t size, LossKind loss,
                                          const torch::Device& device,
                                          std::vector<double>* loss_out) {
  const int64_t s_count = head.num_seeds();
  std::vector<SplitMetrics> metrics(s_count);
  if (loss_out) loss_out->assign(s_count, 0.0);
  if (size == 0) return metrics;
  // No autograd bookkeeping at all while evaluating.
  c10::InferenceMode inference;
  const int n = data.seq_len;
  const torch::Tensor scored = ScoredMask(data, device);
  const int64_t n_scored = data.final_query_only ? 1 : n;
  // Chunk so the widest intermediate (features or scores) stays ~16M floats.
  const HeadConfig& c = head.config();
  const int64_t per_seq =
      s_count * n *
      (static_cast<int64_t>(c.num_heads) * std::max(c.rank, c.m) * 2 + n * n * c.out_dim + c.m);
  const int64_t chunk = std::max<int64_t>(1, (int64_t{1} << 24) / std::max<int64_t>(per_seq, 1));
  auto opts = torch::TensorOptions().dtype(torch::kFloat32).device(device);
  torch::Tensor pos_right = torch::zeros({s_count}, opts);
  torch::Tensor seq_right = torch::zeros({s_count}, opts);
  torch::Tensor max_abs = torch::zeros({s_count}, opts);
  torch::Tensor loss_sum =
      torch::zeros({s_count}, torch::TensorOptions().dtype(torch::kFloat64).device(device));
  for (int64_t start = 0; start < size; start += chunk) {
    const int64_t len = std::min(chunk, size - start);
    torch::Tensor idx = st.tokens.index.narrow(0, start, len).unsqueeze(0);  // [1, len, N]
    torch::Tensor t = st.targets.narrow(0, start, len).unsqueeze(0);         // [1, len, N]
    torch::Tensor out = head.ForwardIndexed(st.tokens.table, idx);           // [S, len, N, K]
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
    mt.sequences = size;
    mt.position_accuracy =
        pos_cpu[s].item<float>() / static_cast<double>(size * n_scored);
    mt.exact_accuracy = seq_cpu[s].item<float>() / static_cast<double>(size);
    mt.error = 1.0 - mt.exact_accuracy;
    mt.max_abs_error = abs_cpu[s].item<float>();
    if (loss_out) {
      (*loss_out)[s] = loss_cpu[s].item<double>() / static_cast<double>(size * n_scored);
    }
  }
  return metrics;
}

// Keeps every `*stride`-th evaluation in `curve`; when it holds
// CurveLimits::kMaxPoints, every other point goes and the stride doubles, so
// a run of any length sends a curve the coordinator accepts, evenly thinned.
void AddCurvePoint(const CurvePoint& point, Curve* curve, int64_t* stride, int64_t* evals) {
  if ((*evals)++ % *stride != 0) return;
  curve->points.push_back(point);
  if (static_cast<int64_t>(curve->points.size()) < CurveLimits::kMaxPoints) return;
  size_t kept = 0;
  for (size_t i = 0; i < curve->points.size(); i += 2) curve->points[kept++] = curve->points[i];
  curve->points.resize(kept);
  *stride *= 2;
}

}  // namespace

std::vector<SplitMetrics> EvaluateSplit(AttentionHeadImpl& head, const Dataset& data,
                                        const Split& split, LossKind loss,
                                        const torch::Device& device,
                                        std::vector<double>* loss_out) {
  if (split.size == 0) {
    if (loss_out) loss_out->assign(head.num_seeds(), 0.0);
    return std::vector<SplitMetrics>(head.num_seeds());
  }
  return EvaluateTensors(head, data, ToTensors(split, data.m, data.seq_len, device), split.size,
                         loss, device, loss_out);
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
  // The first evaluated step at which each seed was exact on train (-1: not yet).
  std::vector<int64_t> first_exact(s_count, -1);
  std::vector<Curve> curves(s_count);
  std::vector<int64_t> curve_stride(s_count, 1), evals(s_count, 0);
  const TrainSpec& ts = spec.train;
  if (!constructed && ts.max_steps > 0) {
    head->train();
    const int n = data.seq_len;
    const SplitTensors train = ToTensors(data.train, data.m, n, device);
    // The test split is measured at every evaluation too: the learning
    // curves (SeedResult.curve) show how far training carries off it.
    const bool has_test = data.test.size > 0;
    SplitTensors test;
    if (has_test) test = ToTensors(data.test, data.m, n, device);
    for (int64_t s = 0; s < s_count; ++s) curves[s].has_test = has_test;
    const int64_t n_scored = data.final_query_only ? 1 : n;
    const int64_t b_total = data.train.size;
    const bool full_batch = ts.batch_size == 0 || ts.batch_size >= b_total;
    const int64_t batch = full_batch ? b_total : ts.batch_size;
    // Scored-position mask and the mean's divisor in one constant [N].
    const torch::Tensor loss_weight =
        ScoredMask(data, device) / static_cast<double>(batch * n_scored);
    // Full batch: one index tensor for every step (the head keeps its
    // gather indices for it).
    torch::Tensor full_idx, full_t;
    if (full_batch) {
      full_idx = train.tokens.index.unsqueeze(0);  // [1, B, N]: every seed
      full_t = train.targets.unsqueeze(0);
    }
    BatchOrder order(spec.seeds, b_total, batch, /*pinned=*/device.is_cuda());
    const bool graph = UseCudaGraph(device, full_batch);
#ifdef RANKSWEEP_CUDA_GRAPHS
    // On a CUDA device the whole loop (steps and evaluations, in order)
    // runs on a stream of its own: capture needs a non-default stream, and
    // with several slots in one process each run's kernels then neither
    // queue behind the others' on the shared default stream nor make an
    // evaluation's read-back wait for them. What the loop reads from before
    // it (data, parameters) was uploaded by blocking copies, and its last
    // evaluation waits for the stream, so the code after it can use the
    // default stream again.
    std::optional<c10::cuda::CUDAStreamGuard> stream_guard;
    if (device.is_cuda()) {
      stream_guard.emplace(c10::cuda::getStreamFromPool(false, device.index()));
    }
#endif
    FusedAdam adam(head->parameters(), ts, /*capturable=*/graph);
    std::vector<char> active(s_count, 1);
    std::vector<int> streak(s_count, 0);
    std::vector<double> train_error(s_count, 1.0);  // for on_eval
    auto upload_active = [&]() {
      torch::Tensor a = torch::empty({s_count}, torch::kFloat32);
      for (int64_t s = 0; s < s_count; ++s) a[s] = active[s] ? 1.0f : 0.0f;
      return a.to(device);
    };
    torch::Tensor active_t = upload_active();
    int64_t n_active = s_count;
    adam.SetActive(active_t, true);
    // One training step. No host synchronization inside: nothing comes
    // back, and the minibatch indices go host -> device from page-locked
    // memory without blocking (from pageable memory, LibTorch's copy waits
    // for the stream, that is for every step queued before it). The pinned
    // block is not reused before its copy is done: LibTorch's caching host
    // allocator records the copy's event.
    auto train_step = [&]() {
      torch::Tensor x, t;
      if (full_batch) {
        x = full_idx;
        t = full_t;
      } else {
        torch::Tensor idx =
            order.Next().to(torch::TensorOptions().device(device), /*non_blocking=*/true).flatten();
        x = train.tokens.index.index_select(0, idx).view({s_count, batch, n});
        t = train.targets.index_select(0, idx).view({s_count, batch, n});
      }
      // Sum over seeds of each seed's mean loss: seed s's gradient is its
      // single-seed gradient. Frozen seeds get gradients too; Adam masks them.
      // The fused CPU head forms the squared error and its gradient in one
      // pass (heads.h, IndexedMseLoss); elsewhere the loss follows the readouts.
      torch::Tensor total;
      if (loss == LossKind::kMse) {
        total = head->IndexedMseLoss(train.tokens.table, x, t, loss_weight);
      }
      if (!total.defined()) {
        torch::Tensor out = head->ForwardIndexed(train.tokens.table, x);
        total = (ElementLoss(out, t, loss) * loss_weight).sum();
      }
      adam.ZeroGrad();
      total.backward();
      adam.Step();
    };
    StepRunner runner(train_step, graph);
    for (int step = 0; step < ts.max_steps && n_active > 0; ++step) {
      runner.Run();
      for (int64_t s = 0; s < s_count; ++s) steps[s] += active[s];
      // Between steps, not only at evaluations: eval_every may be thousands
      // of steps, and a cancelled task (or one whose lease was lost) should
      // free its slot within a heartbeat. A host-side flag; nothing syncs.
      if (options.should_stop && options.should_stop()) {
        return absl::CancelledError(absl::StrCat("stopped after ", step + 1, " steps"));
      }

      const bool last = step + 1 == ts.max_steps;
      if ((step + 1) % ts.eval_every != 0 && !last) continue;
      // The only host synchronization of the loop: every eval_every steps.
      head->eval();
      std::vector<double> eval_loss;
      const std::vector<SplitMetrics> m =
          EvaluateTensors(*head, data, train, b_total, loss, device, &eval_loss);
      std::vector<SplitMetrics> m_test;
      if (has_test) {
        m_test = EvaluateTensors(*head, data, test, data.test.size, loss, device, nullptr);
      }
      head->train();
      bool changed = false;
      for (int64_t s = 0; s < s_count; ++s) {
        if (!active[s]) continue;
        CurvePoint point;
        point.step = step + 1;
        point.loss = static_cast<float>(eval_loss[s]);
        point.train_error = static_cast<float>(m[s].error);
        point.train_position_accuracy = static_cast<float>(m[s].position_accuracy);
        if (has_test) {
          point.test_error = static_cast<float>(m_test[s].error);
          point.test_position_accuracy = static_cast<float>(m_test[s].position_accuracy);
        }
        AddCurvePoint(point, &curves[s], &curve_stride[s], &evals[s]);
        streak[s] = m[s].error == 0.0 ? streak[s] + 1 : 0;
        if (m[s].error == 0.0 && first_exact[s] < 0) first_exact[s] = step + 1;
        if (ts.early_stop_evals > 0 && streak[s] >= ts.early_stop_evals) {
          active[s] = 0;
          stop_seconds[s] = SecondsSince(start);
          --n_active;
          changed = true;
        }
      }
      if (changed) {
        active_t = upload_active();
        adam.SetActive(active_t, n_active == s_count);
      }
      if (options.on_eval) {
        // A seed that stopped early is frozen, so this is its last error.
        for (int64_t s = 0; s < s_count; ++s) train_error[s] = m[s].error;
        options.on_eval(step + 1, train_error);
      }
      if (options.on_progress) options.on_progress(step + 1);
    }
  }

  head->eval();
  std::vector<double> final_loss;
  const std::vector<SplitMetrics> train_m =
      EvaluateSplit(*head, data, data.train, loss, device, &final_loss);
  std::vector<double> test_loss;
  const std::vector<SplitMetrics> test_m =
      EvaluateSplit(*head, data, data.test, loss, device, &test_loss);
  const double total = SecondsSince(start);
  std::vector<SeedResult> results(s_count);
  for (int64_t s = 0; s < s_count; ++s) {
    SeedResult& r = results[s];
    r.seed = spec.seeds[s];
    r.train = train_m[s];
    r.test = test_m[s];
    r.final_loss = final_loss[s];
    r.steps = steps[s];
    r.curve = std::move(curves[s]);
    if (first_exact[s] >= 0) {
      SetMetric("first_exact_step", first_exact[s], &r);
    } else if (steps[s] == 0 && r.train.error == 0.0) {
      SetMetric("first_exact_step", 0, &r);  // exact as built, before any step
    }
    if (data.test.size > 0) SetMetric("final_test_loss", test_loss[s], &r);
    // A frozen seed reports the time until it froze.
    r.wall_seconds = stop_seconds[s] >= 0 ? stop_seconds[s] : total;
  }
  return results;
}

}  // namespace ranksweep::trainer
