#include "server/service/sweep_service.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <memory>
#include <string>
#include <utility>

#include "common/spec/result_validation.h"
#include "common/spec/spec_file.h"
#include "common/spec/spec_json.h"
#include "common/status_macros.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "proto/convert.h"
#include "proto/reply_arena.h"
#include "proto/wire_check.h"
#include "server/service/call_auth.h"
#include "server/service/malformed_request.h"
#include "server/service/translate.h"

namespace ranksweep::server {
namespace {

// The spec of a SubmitSweep or ValidateSweep request: its SweepSpec, checked
// for what only the wire form can get wrong, or its spec text, read by the
// parser of `ranksweep submit -f` (common/spec/spec_file.h). Neither set is
// an empty SweepSpec, which validation then refuses by its first field.
template <typename Request>
absl::StatusOr<SweepSpec> SpecOfRequest(const Request& request) {
  if (request.input_case() != Request::kSpecText) {
    RETURN_IF_ERROR(CheckWireSweepSpec(request.spec()));
    return ranksweep::FromProto(request.spec());
  }
  const v1::SpecText& t = request.spec_text();
  RETURN_IF_ERROR(CheckTextLength("spec_text.text", t.text(), kMaxSpecTextBytes));
  RETURN_IF_ERROR(CheckTextLength("spec_text.source", t.source(), kMaxSpecSourceBytes));
  ASSIGN_OR_RETURN(SpecFormat format, ParseSpecFormat(t.format(), t.text(), "spec_text.format"));
  return ParseSweepSpecText(t.text(), format, t.source().empty() ? "<spec>" : t.source());
}


// A WatchSweep refused before it started (authorization, shutdown).
class RefusedWatch final : public grpc::ServerWriteReactor<v1::SweepEvent> {
 public:
  explicit RefusedWatch(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

// Messages queued for a slow watcher beyond this are dropped (oldest
// first); every event carries the full SweepInfo, so nothing but the
// message text is lost.
constexpr size_t kMaxQueuedEvents = 256;

// An event's SweepInfo is read afresh when the last one read is older than
// this, or than ten times what that read took, whichever is longer.
constexpr auto kMinSnapshotReuse = std::chrono::milliseconds(100);
constexpr int kSnapshotCostFactor = 10;

}  // namespace

// Streams SweepEvents for one sweep: one at once, one per change, a final one
// when the sweep ends, then OK. One write is in flight at a time; changes that
// arrive meanwhile queue up.
//
// Cost. Each event carries the sweep's SweepInfo, and reading it counts the
// sweep's cells and results: on a sweep of 100,000 cells that takes tens of
// milliseconds. Read once per change, on the thread that made the change,
// one watcher held up every AcquireTasks and CompleteTasks of the sweep
// behind those reads (dispatch_bench --watchers=1: 48 cells/s instead of
// about 1,800). So the listener only queues the message; the SweepInfo is
// read on the service's call pool, never on a worker's call or on gRPC's
// threads, and is reused for the events that follow until it is older than
// kMinSnapshotReuse or ten times what reading it took. One watcher thus
// spends about a tenth of a core at most on reads however fast cells change
// and however large the sweep, and an event's counts lag its message by at
// most that age. The first event and a final one always read afresh.
//
// States, under mu_: busy_ while a read is queued or running on the pool or
// a write is in flight (never both); the call is finished only when neither
// is (or by the one running), so no pool job outlives the reactor. Once
// finishing_ is set nothing reads busy_ again.

class SweepServiceImpl::WatchReactor final : public grpc::ServerWriteReactor<v1::SweepEvent> {
 public:
  WatchReactor(SweepServiceImpl* service, std::string sweep_id)
      : service_(service), coordinator_(service->coordinator_), sweep_id_(std::move(sweep_id)) {}

  // Subscribes before the first snapshot so that no change falls in between.
  void Start() {
    subscription_ = coordinator_->Subscribe(
        sweep_id_, [this](const SweepChange& change) { Enqueue(change.message, change.final); });
    Enqueue("watching " + sweep_id_, false);
  }

  // Called by the coordinator's listener on the thread that made the change:
  // queues, and at most writes an event from the snapshot at hand.
  void Enqueue(const std::string& message, bool final) {
    std::lock_guard<std::mutex> lock(mu_);
    if (finishing_) return;
    if (queue_.size() >= kMaxQueuedEvents) queue_.pop_front();
    queue_.push_back({message, final});
    if (!busy_) NextLocked();
  }

  void Shutdown() {
    std::lock_guard<std::mutex> lock(mu_);
    if (finishing_) return;
    shutting_down_ = true;
    if (!busy_) FinishLocked(grpc::Status(grpc::StatusCode::UNAVAILABLE, "server shutting down"));
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> lock(mu_);
    busy_ = false;
    if (finishing_) return;
    if (!ok) return FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "stream broken"));
    if (shutting_down_) {
      return FinishLocked(grpc::Status(grpc::StatusCode::UNAVAILABLE, "server shutting down"));
    }
    if (last_was_final_) return FinishLocked(grpc::Status::OK);
    if (!queue_.empty()) NextLocked();
  }

  void OnCancel() override {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
    if (!finishing_ && !busy_) FinishLocked(grpc::Status::CANCELLED);
    // Busy: the write's OnWriteDone(false) or the queued read finishes.
  }

  void OnDone() override {
    coordinator_->Unsubscribe(subscription_);
    service_->Forget(this);
    delete this;
  }

 private:
  using SteadyClock = std::chrono::steady_clock;
  struct Item {
    std::string message;
    bool final;
  };

  // The next queued item, !busy_ and queue_ not empty: written at once when
  // the snapshot at hand may serve it, else after a fresh read on the pool.
  void NextLocked() {
    const bool fresh = !event_.has_sweep() || queue_.front().final ||
                       SteadyClock::now() - snapshot_time_ > snapshot_reuse_;
    busy_ = true;
    if (!fresh) return WriteLocked();
    if (!service_->pool_.Run([this] { ReadAndWrite(); })) {
      FinishLocked(grpc::Status(grpc::StatusCode::UNAVAILABLE, "server shutting down"));
    }
  }

  // On the pool: reads the SweepInfo, then writes the next item with it.
  void ReadAndWrite() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (FinishIfEndedLocked()) return;  // no read for a call that is over
    }
    const SteadyClock::time_point start = SteadyClock::now();
    absl::StatusOr<SweepInfo> info = coordinator_->GetSweep(sweep_id_);
    const SteadyClock::time_point end = SteadyClock::now();
    std::lock_guard<std::mutex> lock(mu_);
    if (FinishIfEndedLocked()) return;
    if (!info.ok()) return FinishLocked(ToGrpcStatus(info.status()));
    *event_.mutable_sweep() = ToProto(*info);
    snapshot_time_ = end;
    snapshot_reuse_ = std::max<SteadyClock::duration>(kMinSnapshotReuse,
                                                      kSnapshotCostFactor * (end - start));
    WriteLocked();
  }

  // Writes the next item with the snapshot in event_; busy_ is set.
  void WriteLocked() {
    Item item = std::move(queue_.front());
    queue_.pop_front();
    event_.set_message(std::move(item.message));
    // The first event of an ended sweep is also its last.
    last_was_final_ = item.final || event_.sweep().state() != v1::SWEEP_STATE_RUNNING;
    StartWrite(&event_);
  }

  // While a read is queued or running (busy_): finishes the call if it was
  // cancelled or the server is shutting down meanwhile.
  bool FinishIfEndedLocked() {
    if (!cancelled_ && !shutting_down_) return false;
    FinishLocked(cancelled_ ? grpc::Status::CANCELLED
                            : grpc::Status(grpc::StatusCode::UNAVAILABLE, "server shutting down"));
    return true;
  }

  void FinishLocked(const grpc::Status& status) {
    finishing_ = true;
    queue_.clear();
    Finish(status);
  }

  SweepServiceImpl* const service_;
  Coordinator* const coordinator_;
  const std::string sweep_id_;
  int64_t subscription_ = 0;

  std::mutex mu_;
  std::deque<Item> queue_;
  v1::SweepEvent event_;  // the write in flight; its sweep, once set, is the snapshot at hand
  SteadyClock::time_point snapshot_time_;
  SteadyClock::duration snapshot_reuse_{kMinSnapshotReuse};
  bool busy_ = false;
  bool finishing_ = false;
  bool shutting_down_ = false;
  bool cancelled_ = false;
  bool last_was_final_ = false;
};

SweepServiceImpl::SweepServiceImpl(Coordinator* coordinator, const Authorizer* authorizer,
                                   SweepServiceOptions options)
    : coordinator_(coordinator),
      authorizer_(authorizer),
      metrics_(options.metrics),
      query_cache_(options.query_cache_bytes) {
  if (options.column_block_rows > 0) {
    sealer_ = std::make_unique<BlockSealer>(coordinator_, options.column_block_rows);
    // Each sweep that ends is sealed into blocks behind it.
    BlockSealer* sealer = sealer_.get();
    end_subscription_ = coordinator_->Subscribe("", [sealer](const SweepChange& change) {
      if (change.final) sealer->Seal(change.sweep_id);
    });
  }
}

SweepServiceImpl::~SweepServiceImpl() { Shutdown(); }

void SweepServiceImpl::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    shutting_down_ = true;
    for (WatchReactor* w : watches_) w->Shutdown();
  }
  // Calls already handed to the pool run to the end; later ones get
  // UNAVAILABLE.
  pool_.Shutdown();
  // The sweep being sealed is finished; the others queued are left.
  if (end_subscription_ != 0) coordinator_->Unsubscribe(end_subscription_);
  end_subscription_ = 0;
  sealer_.reset();
}

void SweepServiceImpl::Forget(WatchReactor* reactor) {
  std::lock_guard<std::mutex> lock(mu_);
  watches_.erase(reactor);
}

absl::Status SweepServiceImpl::CheckAccess(const Principal& caller, const std::string& sweep_id,
                                           std::string_view action) {
  if (SeesAllSweeps(caller)) return absl::OkStatus();
  absl::StatusOr<std::string> owner = coordinator_->SweepOwner(sweep_id);
  if (!owner.ok()) return owner.status();
  return CheckSweepAccess(caller, sweep_id, *owner, action);
}

grpc::ServerUnaryReactor* SweepServiceImpl::SubmitSweep(grpc::CallbackServerContext* context,
                                                        const v1::SubmitSweepRequest* request,
                                                        v1::SubmitSweepResponse* response) {
  return OffloadUnary(pool_, context, [this, context, request, response]() -> absl::Status {
    absl::StatusOr<Principal> caller = AuthorizeCall(*authorizer_, context, methods::kSubmitSweep);
    if (!caller.ok()) return caller.status();
    ASSIGN_OR_RETURN(SweepSpec spec, SpecOfRequest(*request));
    absl::StatusOr<SubmitOutcome> out = coordinator_->Submit(spec, caller->name);
    if (out.ok()) {
      response->set_sweep_id(out->sweep_id);
      response->set_cells(out->cells);
      response->set_cached_cells(out->cached_cells);
    }
    return out.status();
  });
}

grpc::ServerUnaryReactor* SweepServiceImpl::GetSweep(grpc::CallbackServerContext* context,
                                                     const v1::GetSweepRequest* request,
                                                     v1::GetSweepResponse* response) {
  return OffloadUnary(pool_, context, [this, context, request, response]() -> absl::Status {
    absl::StatusOr<Principal> caller = AuthorizeCall(*authorizer_, context, methods::kGetSweep);
    if (!caller.ok()) return caller.status();
    absl::StatusOr<SweepInfo> info = coordinator_->GetSweep(request->sweep_id());
    if (!info.ok()) return info.status();
    absl::Status access = CheckSweepAccess(*caller, info->sweep_id, info->owner, "read");
    if (!access.ok()) return access;
    *response->mutable_sweep() = ToProto(*info);
    response->set_spec_json(SweepSpecToJson(info->spec, 2));
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* SweepServiceImpl::ValidateSweep(grpc::CallbackServerContext* context,
                                                          const v1::ValidateSweepRequest* request,
                                                          v1::ValidateSweepResponse* response) {
  return OffloadUnary(pool_, context, [this, context, request, response]() -> absl::Status {
    absl::StatusOr<Principal> caller =
        AuthorizeCall(*authorizer_, context, methods::kValidateSweep);
    if (!caller.ok()) return caller.status();
    ASSIGN_OR_RETURN(SweepSpec spec, SpecOfRequest(*request));
    RETURN_IF_ERROR(coordinator_->CheckSubmit(spec));
    const SweepCost cost = EstimateSweepCost(spec);
    *response->mutable_spec() = ranksweep::ToProto(spec);
    response->set_spec_json(SweepSpecToJson(spec, 2));
    response->set_cells(GridCellCount(spec));
    response->set_recipes(RecipeCount(spec));
    response->set_train_sequences(cost.train_sequences);
    response->set_test_sequences(cost.test_sequences);
    response->set_task_memory_bytes(cost.task_memory_bytes);
    response->set_largest_task(cost.largest_task);
    for (std::string& w : SweepWarnings(spec, cost)) response->add_warnings(std::move(w));
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* SweepServiceImpl::ListSweeps(grpc::CallbackServerContext* context,
                                                       const v1::ListSweepsRequest* request,
                                                       v1::ListSweepsResponse* response) {
  return OffloadUnary(pool_, context, [this, context, request, response]() -> absl::Status {
    absl::StatusOr<Principal> caller = AuthorizeCall(*authorizer_, context, methods::kListSweeps);
    if (!caller.ok()) return caller.status();
    absl::StatusOr<std::optional<SweepState>> state =
        SweepStateFromProto(request->state(), "state");
    if (!state.ok()) return state.status();
    if (request->limit() < 0) {
      return absl::InvalidArgumentError("limit: must be >= 0");
    }
    const std::optional<std::string> owner =
        SeesAllSweeps(*caller) ? std::nullopt : std::optional<std::string>(caller->name);
    absl::StatusOr<std::vector<SweepInfo>> sweeps =
        coordinator_->ListSweeps(*state, request->limit(), owner);
    if (sweeps.ok()) {
      for (const SweepInfo& s : *sweeps) *response->add_sweeps() = ToProto(s);
    }
    return sweeps.status();
  });
}

grpc::ServerUnaryReactor* SweepServiceImpl::CancelSweep(grpc::CallbackServerContext* context,
                                                        const v1::CancelSweepRequest* request,
                                                        v1::CancelSweepResponse* response) {
  return OffloadUnary(pool_, context, [this, context, request, response]() -> absl::Status {
    absl::StatusOr<Principal> caller = AuthorizeCall(*authorizer_, context, methods::kCancelSweep);
    if (!caller.ok()) return caller.status();
    // Owners never change, so checking before cancelling races with nothing.
    absl::Status access = CheckAccess(*caller, request->sweep_id(), "cancel");
    if (!access.ok()) return access;
    absl::StatusOr<int64_t> n = coordinator_->Cancel(request->sweep_id());
    if (n.ok()) response->set_cells_cancelled(*n);
    return n.status();
  });
}

grpc::ServerWriteReactor<v1::SweepEvent>* SweepServiceImpl::WatchSweep(
    grpc::CallbackServerContext* context, const v1::WatchSweepRequest* request) {
  absl::StatusOr<Principal> caller = AuthorizeCall(*authorizer_, context, methods::kWatchSweep);
  if (!caller.ok()) return new RefusedWatch(ToGrpcStatus(caller.status()));
  absl::Status access = CheckAccess(*caller, request->sweep_id(), "read");
  if (!access.ok()) return new RefusedWatch(ToGrpcStatus(access));
  auto* reactor = new WatchReactor(this, request->sweep_id());
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shutting_down_) {
      reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "server shutting down"));
      return reactor;  // OnDone deletes it; Forget finds nothing
    }
    watches_.insert(reactor);
  }
  reactor->Start();
  return reactor;
}

namespace {

// A grpc::ByteBuffer that sends `bytes` by reference, holding them until
// gRPC is done with them.
grpc::ByteBuffer BytesOf(std::shared_ptr<const std::string> bytes) {
  auto* held = new std::shared_ptr<const std::string>(std::move(bytes));
  grpc::Slice slice(const_cast<char*>((*held)->data()), (*held)->size(),
                    [](void* p) { delete static_cast<std::shared_ptr<const std::string>*>(p); },
                    held);
  return grpc::ByteBuffer(&slice, 1);
}

}  // namespace

grpc::ServerUnaryReactor* SweepServiceImpl::QueryResults(grpc::CallbackServerContext* context,
                                                         const grpc::ByteBuffer* request_bytes,
                                                         grpc::ByteBuffer* response_bytes) {
  return OffloadUnary(pool_, context,
                      [this, context, request_bytes, response_bytes]() -> absl::Status {
    // The reply lives on an arena: a tree of many small messages, freed in
    // one step, or a few lists of megabytes, which ReplyArena grows into
    // with few page faults. It is made only for a reply the cache lacks.
    google::protobuf::Arena request_arena;
    auto* request =
        google::protobuf::Arena::CreateMessage<v1::QueryResultsRequest>(&request_arena);
    grpc::ByteBuffer received(*request_bytes);
    if (!grpc::SerializationTraits<v1::QueryResultsRequest>::Deserialize(&received, request)
             .ok()) {
      return absl::InvalidArgumentError(
          MalformedRequestMessage(v1::QueryResultsRequest::descriptor()->full_name()));
    }
    absl::StatusOr<Principal> caller = AuthorizeCall(*authorizer_, context, methods::kQueryResults);
    if (!caller.ok()) return caller.status();
    RETURN_IF_ERROR(CheckAccess(*caller, request->sweep_id(), "read"));
    // Rows of done and failed cells come from result_packs alone, which the
    // results version follows; groups, state filters and curves read more.
    const bool cacheable = query_cache_.max_bytes() > 0 &&
                           request->group_by() == v1::GROUP_BY_UNSPECIFIED &&
                           request->state() == v1::CELL_STATE_UNSPECIFIED && !request->curves();
    std::string key;
    int64_t version = 0;
    if (cacheable) {
      ASSIGN_OR_RETURN(version, coordinator_->ResultsVersion(request->sweep_id()));
      {
        // The key: the request's fields, in one order whatever order they came in.
        google::protobuf::io::StringOutputStream out(&key);
        google::protobuf::io::CodedOutputStream coded(&out);
        coded.SetSerializationDeterministic(true);
        request->SerializeToCodedStream(&coded);
      }
      std::shared_ptr<const std::string> kept = query_cache_.Find(key, version);
      CountCacheLookup(kept != nullptr);
      if (kept != nullptr) {
        *response_bytes = BytesOf(std::move(kept));
        return absl::OkStatus();
      }
    }
    // Shared: a reply joined from column blocks is sent from the arena's
    // memory, which lasts until gRPC is done with it.
    auto held = std::make_shared<JoinedReply>();
    auto* response =
        google::protobuf::Arena::CreateMessage<v1::QueryResultsResponse>(held->arena.get());
    RETURN_IF_ERROR(AnswerQuery(*request, response, &held->columns));
    if (!held->columns.parts().empty()) {
      // Columns joined from column blocks (server/service/column_blocks.h).
      if (!cacheable) return JoinedReplyBytes(*response, held, response_bytes);
      ASSIGN_OR_RETURN(std::string bytes, JoinedReplyString(*response, *held));
      return KeepAndSend(key, version, std::make_shared<const std::string>(std::move(bytes)),
                         response_bytes);
    }
    if (!cacheable) {
      // One pass to size the reply and one to write it. gRPC's own
      // serializer sizes a message twice (once itself, once more inside
      // protobuf's stream serializer), and sizing the varint columns of
      // 100,000 rows costs about as much as writing them: a third fewer
      // instructions this way (bench/dispatch_bench.cc's query reply).
      const size_t size = response->ByteSizeLong();
      grpc::Slice slice(size);
      response->SerializeWithCachedSizesToArray(const_cast<uint8_t*>(slice.begin()));
      *response_bytes = grpc::ByteBuffer(&slice, 1);
      return absl::OkStatus();
    }
    auto bytes = std::make_shared<std::string>();
    if (!response->SerializeToString(bytes.get())) {
      return absl::InternalError("the reply could not be encoded");
    }
    return KeepAndSend(key, version, std::move(bytes), response_bytes);
  });
}

absl::Status SweepServiceImpl::KeepAndSend(const std::string& key, int64_t version,
                                           std::shared_ptr<const std::string> reply,
                                           grpc::ByteBuffer* response_bytes) {
  query_cache_.Put(key, version, reply);
  if (metrics_ != nullptr) {
    metrics_->Set("ranksweep_query_cache_bytes", {},
                  static_cast<double>(query_cache_.stats().bytes));
  }
  *response_bytes = BytesOf(std::move(reply));
  return absl::OkStatus();
}

void SweepServiceImpl::CountCacheLookup(bool hit) {
  if (metrics_ == nullptr) return;
  metrics_->Add(hit ? "ranksweep_query_cache_hits_total" : "ranksweep_query_cache_misses_total",
                {});
}

absl::Status SweepServiceImpl::AnswerQuery(const v1::QueryResultsRequest& request,
                                           v1::QueryResultsResponse* response,
                                           JoinedColumns* joined) {
  ResultQuery query;
  query.sweep_id = request.sweep_id();
  query.head = request.head();
  query.ranks.assign(request.ranks().begin(), request.ranks().end());
  query.seeds.assign(request.seeds().begin(), request.seeds().end());
  absl::StatusOr<std::optional<CellState>> state = CellStateFromProto(request.state(), "state");
  if (!state.ok()) return state.status();
  query.state = *state;
  absl::StatusOr<GroupBy> group_by = GroupByFromProto(request.group_by());
  if (!group_by.ok()) return group_by.status();
  query.group_by = *group_by;
  query.criterion = request.criterion();
  query.page_size = request.page_size();
  query.curves = request.curves();
  if (query.curves && request.columns()) {
    return absl::InvalidArgumentError(
        "curves: learning curves come with rows (ResultRow), not with columns");
  }
  absl::StatusOr<int64_t> after = CellIdFromPageToken(request.page_token());
  if (!after.ok()) return after.status();
  query.after_cell_id = *after;
  // Rows go straight into the reply as they are read.
  struct Rows final : RowSink {
    v1::QueryResultsResponse* response;
    explicit Rows(v1::QueryResultsResponse* r) : response(r) {}
    void Expect(int64_t at_most) override {
      response->mutable_rows()->Reserve(static_cast<int>(at_most));
    }
    void Add(const ResultRow& row) override { FillProto(row, response->add_rows()); }
  };
  absl::StatusOr<QueryOutcome> out;
  if (request.columns() && query.group_by == GroupBy::kNone) {
    out = QueryColumns(*coordinator_, query, response, joined, sealer_.get());
  } else {
    Rows rows(response);
    out = coordinator_->Query(query, rows);
  }
  if (out.ok()) {
    response->set_next_page_token(PageToken(out->next_after_cell_id));
    for (const ResultGroup& g : out->groups) *response->add_groups() = ToProto(g);
    for (const HeadSummary& h : out->heads) *response->add_heads() = ToProto(h);
    for (const AxisLaw& law : out->laws) *response->add_laws() = ToProto(law);
    if (out->facts.has_value()) *response->mutable_facts() = ranksweep::ToProto(*out->facts);
    if (query.group_by != GroupBy::kNone) {
      response->set_criterion(out->criterion);
      response->mutable_recipe_labels()->insert(out->recipe_labels.begin(),
                                                out->recipe_labels.end());
    }
  }
  return out.status();
}

grpc::ServerUnaryReactor* SweepServiceImpl::ListWorkers(grpc::CallbackServerContext* context,
                                                        const v1::ListWorkersRequest* request,
                                                        v1::ListWorkersResponse* response) {
  return OffloadUnary(pool_, context, [this, context, request, response]() -> absl::Status {
    (void)request;
    absl::StatusOr<Principal> caller = AuthorizeCall(*authorizer_, context, methods::kListWorkers);
    if (!caller.ok()) return caller.status();
    absl::StatusOr<std::vector<WorkerInfo>> workers = coordinator_->ListWorkers();
    if (workers.ok()) {
      for (const WorkerInfo& w : *workers) *response->add_workers() = ToProto(w);
    }
    return workers.status();
  });
}

grpc::ServerUnaryReactor* SweepServiceImpl::QuarantineWorker(
    grpc::CallbackServerContext* context, const v1::QuarantineWorkerRequest* request,
    v1::QuarantineWorkerResponse* response) {
  return OffloadUnary(pool_, context, [this, context, request, response]() -> absl::Status {
    absl::StatusOr<Principal> caller =
        AuthorizeCall(*authorizer_, context, methods::kQuarantineWorker);
    if (!caller.ok()) return caller.status();
    absl::StatusOr<QuarantineOutcome> out =
        coordinator_->Quarantine(request->worker_id(), request->since_unix_ms(), caller->name,
                                 request->hold_token());
    if (!out.ok()) return out.status();
    response->set_quarantine_id(out->quarantine_id);
    response->set_results_invalidated(out->results_invalidated);
    response->set_copies_invalidated(out->copies_invalidated);
    response->set_cells_reset(out->cells_reset);
    response->set_leases_released(out->leases_released);
    response->set_token_held(out->token_held);
    for (const std::string& id : out->sweeps_reopened) response->add_sweeps_reopened(id);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* SweepServiceImpl::UnquarantineWorker(
    grpc::CallbackServerContext* context, const v1::UnquarantineWorkerRequest* request,
    v1::UnquarantineWorkerResponse* response) {
  return OffloadUnary(pool_, context, [this, context, request, response]() -> absl::Status {
    absl::StatusOr<Principal> caller =
        AuthorizeCall(*authorizer_, context, methods::kUnquarantineWorker);
    if (!caller.ok()) return caller.status();
    absl::StatusOr<bool> was = coordinator_->Unquarantine(request->worker_id(), caller->name);
    if (!was.ok()) return was.status();
    response->set_was_quarantined(*was);
    return absl::OkStatus();
  });
}

}  // namespace ranksweep::server
