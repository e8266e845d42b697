// `ranksweep list`, `status`, `watch` and `cancel`: following sweeps.
#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/commands.h"
#include "client/format.h"
#include "client/sweep_views.h"
#include "common/plural.h"

namespace ranksweep::client {

// --reconnect, for `watch` and `submit --watch`.
void AddReconnectOption(CLI::App* app, double* seconds) {
  app->add_option("--reconnect", *seconds,
                  "Seconds `watch` keeps reconnecting to a coordinator lost mid-sweep; 0 = exit "
                  "at once (code 2)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
}

int Watch(Client& client, const std::string& sweep_id, double reconnect_seconds) {
  v1::WatchSweepRequest req;
  req.set_sweep_id(sweep_id);
  // Progress is for a person: on stdout when that is a terminal, otherwise
  // on stderr, so that `id=$(ranksweep submit ... --watch)` captures the id
  // alone and `ranksweep watch ID > file` writes nothing there. It redraws
  // one line when it lands on a terminal, else prints a line per event.
  const bool stdout_tty = isatty(STDOUT_FILENO) != 0;
  std::ostream& progress = stdout_tty ? std::cout : std::cerr;
  const bool tty = stdout_tty || isatty(STDERR_FILENO) != 0;
  v1::SweepEvent event;
  v1::SweepInfo last;
  bool any = false;       // an event came on any stream
  bool on_line = false;   // a progress line without its newline is on the TTY
  absl::Time lost_at = absl::InfinitePast();  // when the current outage began
  absl::Duration backoff = absl::Seconds(1);
  grpc::Status status;
  while (true) {
    // No deadline: a sweep may run for days.
    auto ctx = client.Context(/*with_deadline=*/false);
    auto reader = client.stub().WatchSweep(ctx.get(), req);
    bool got = false;
    while (reader->Read(&event)) {
      if (!got && lost_at != absl::InfinitePast()) {
        std::cerr << "ranksweep: watch: reconnected\n";
        lost_at = absl::InfinitePast();
        backoff = absl::Seconds(1);
      }
      got = any = true;
      last = event.sweep();
      if (tty) {
        progress << "\r" << ProgressLine(last) << "\033[K" << std::flush;
        on_line = true;
      } else {
        progress << ProgressLine(last);
        if (!event.message().empty()) progress << "  " << event.message();
        progress << "\n" << std::flush;
      }
    }
    status = reader->Finish();
    // A coordinator that shuts down ends open streams with UNAVAILABLE, or
    // with CANCELLED when it cuts one mid-write or at its grace deadline;
    // watch never cancels its own stream, so both mean "lost", not "done".
    const bool lost = (status.error_code() == grpc::StatusCode::UNAVAILABLE ||
                       status.error_code() == grpc::StatusCode::CANCELLED) &&
                      any && last.state() == v1::SWEEP_STATE_RUNNING;
    if (!lost || reconnect_seconds <= 0) break;
    const absl::Time now = absl::Now();
    if (lost_at == absl::InfinitePast()) {
      lost_at = now;
      if (on_line) progress << "\n" << std::flush;
      on_line = false;
      std::cerr << "ranksweep: watch: lost the coordinator (" << status.error_message()
                << "); reconnecting for up to " << reconnect_seconds << " s\n";
    } else if (now - lost_at >= absl::Seconds(reconnect_seconds)) {
      break;
    }
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Seconds(10));
  }
  if (on_line) progress << "\n" << std::flush;
  if (!status.ok()) return Report(client.globals(), status, "watch");
  switch (last.state()) {
    case v1::SWEEP_STATE_DONE:
      std::cerr << "sweep " << sweep_id << " DONE\n";
      return kExitOk;
    case v1::SWEEP_STATE_FAILED:
    case v1::SWEEP_STATE_CANCELLED:
      std::cerr << "sweep " << sweep_id << " " << SweepStateName(last.state()) << "\n";
      for (const auto& f : last.recent_failures()) std::cerr << "  " << f << "\n";
      return kExitSweepFailed;
    default:
      std::cerr << "ranksweep: watch: the stream closed while the sweep was "
                << SweepStateName(last.state()) << "\n";
      return kExitServerError;
  }
}

void AddListCommand(CLI::App* app, Command* command) {
  // The flags' values, kept alive by the callbacks that read them.
  struct Flags {
    std::string list_state;
    int list_limit = 0;
    std::string tag, search;
    bool archived = false;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* list = app->add_subcommand("list", "List sweeps, newest first");
  list->footer(kHelpFooter);
  list->add_option("--state", f->list_state, "running | done | failed | cancelled");
  list->add_option("--limit", f->list_limit, "At most this many; 0 = server default (100)");
  list->add_option("--tag", f->tag, "Only sweeps with this tag (ranksweep sweep tag)");
  list->add_option("--search", f->search,
                   "Only sweeps whose id, name, owner, note or a tag contains this (any case)");
  list->add_flag("--archived", f->archived, "Also archived sweeps (ranksweep sweep archive)");
  list->callback([command, f] {
    command->action = [f](Client* c) {
      v1::ListManagedSweepsRequest req;
      if (!f->list_state.empty()) {
        absl::StatusOr<v1::SweepState> state = ParseSweepState(f->list_state);
        if (!state.ok()) return ReportLocal(state.status());
        req.set_state(*state);
      }
      req.set_limit(f->list_limit);
      req.set_tag(f->tag);
      req.set_search(f->search);
      req.set_include_archived(f->archived);
      int code = kExitOk;
      absl::StatusOr<std::vector<v1::SweepInfo>> sweeps = ListManaged(c, req, &code);
      if (!sweeps.ok()) return code;
      std::cout << RenderTable(SweepsTable(*sweeps, absl::LocalTimeZone()));
      return static_cast<int>(kExitOk);
    };
  });
}

void AddStatusCommand(CLI::App* app, Command* command) {
  struct Flags {
    std::string status_id;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* status_cmd = app->add_subcommand("status", "Show one sweep: counts, state, failures");
  status_cmd->footer(kHelpFooter);
  status_cmd->add_option("sweep", f->status_id, "Sweep id")->required();
  status_cmd->callback([command, f] {
    command->action = [f](Client* c) {
      int code = kExitOk;
      absl::StatusOr<v1::SweepInfo> sweep = GetSweep(c, f->status_id, &code);
      if (!sweep.ok()) return code;
      std::cout << SweepStatusText(*sweep, absl::LocalTimeZone());
      return static_cast<int>(kExitOk);
    };
  });
}

void AddWatchCommand(CLI::App* app, Command* command) {
  struct Flags {
    std::string watch_id;
    double watch_reconnect = kDefaultReconnectSeconds;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* watch = app->add_subcommand(
      "watch", "Follow a sweep until it ends; exit 0 if DONE, 4 if FAILED/CANCELLED");
  watch->footer(kHelpFooter);
  watch->add_option("sweep", f->watch_id, "Sweep id")->required();
  AddReconnectOption(watch, &f->watch_reconnect);
  watch->callback([command, f] {
    command->action = [f](Client* c) { return Watch(*c, f->watch_id, f->watch_reconnect); };
  });
}

void AddCancelCommand(CLI::App* app, Command* command) {
  struct Flags {
    std::string cancel_id;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cancel = app->add_subcommand("cancel", "Cancel a sweep's unfinished cells");
  cancel->footer(kHelpFooter);
  cancel->add_option("sweep", f->cancel_id, "Sweep id")->required();
  cancel->callback([command, f] {
    command->action = [f](Client* c) {
      const std::string& cancel_id = f->cancel_id;
      v1::CancelSweepRequest req;
      req.set_sweep_id(cancel_id);
      v1::CancelSweepResponse resp;
      auto ctx = c->Context();
      grpc::Status status = c->stub().CancelSweep(ctx.get(), req, &resp);
      if (status.error_code() == grpc::StatusCode::FAILED_PRECONDITION) {
        // Already ended: what the user asked for holds, so this is no error.
        int code = kExitOk;
        absl::StatusOr<v1::SweepInfo> sweep = GetSweep(c, cancel_id, &code);
        if (!sweep.ok()) return code;
        if (sweep->state() != v1::SWEEP_STATE_RUNNING) {
          std::cout << "sweep " << cancel_id << " has already ended "
                    << SweepStateName(sweep->state()) << "; nothing to cancel\n";
          return static_cast<int>(kExitOk);
        }
      }
      if (!status.ok()) return Report(c->globals(), status, "cancel");
      std::cout << "cancelled " << CountOf(resp.cells_cancelled(), "cell") << " of "
                << cancel_id << "\n";
      return static_cast<int>(kExitOk);
    };
  });
}

}  // namespace ranksweep::client
