// `ranksweep sweep note|tag|rename|archive|delete|retry`: managing a sweep
// after it is submitted (SweepAdminService, proto/ranksweep/v1/
// sweep_admin.proto), and the managed listing `ranksweep list` uses.
#include <unistd.h>

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "client/commands.h"
#include "client/format.h"
#include "client/sweep_views.h"
#include "common/plural.h"
#include "ranksweep/v1/sweep_admin.grpc.pb.h"

namespace ranksweep::client {
namespace {

std::unique_ptr<v1::SweepAdminService::Stub> AdminStub(Client* c) {
  return v1::SweepAdminService::NewStub(c->channel());
}

// The sweep's notes as `sweep note|tag|archive` print them after a change.
void PrintNotes(const v1::ManagedSweep& s) {
  std::cout << s.sweep().sweep_id() << "  " << s.sweep().name()
            << (s.archived() ? "  (archived)" : "") << "\n";
  std::cout << "tags: " << (s.tags().empty() ? "-" : absl::StrJoin(s.tags(), " ")) << "\n";
  std::cout << "note: " << (s.note().empty() ? "-" : s.note()) << "\n";
}

int Update(Client* c, const v1::UpdateSweepRequest& req, const char* what) {
  v1::UpdateSweepResponse resp;
  auto ctx = c->Context();
  grpc::Status status = AdminStub(c)->UpdateSweep(ctx.get(), req, &resp);
  if (!status.ok()) return Report(c->globals(), status, what);
  PrintNotes(resp.sweep());
  return kExitOk;
}

}  // namespace

void AddSweepCommand(CLI::App* app, Command* command) {
  struct Flags {
    std::string id, text, name, confirm;
    std::vector<std::string> tags;
    bool remove = false, undo = false, yes = false, failed = false, cancelled = false;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* sweep = app->add_subcommand(
      "sweep", "Manage a sweep: note, tag, rename, archive, delete, retry");
  sweep->footer(kHelpFooter);
  sweep->require_subcommand(1);

  CLI::App* note = sweep->add_subcommand("note", "Set the sweep's note (\"\" clears it)");
  note->add_option("sweep", f->id, "Sweep id")->required();
  note->add_option("text", f->text, "The note, at most 4096 bytes")->required();
  note->callback([command, f] {
    command->action = [f](Client* c) {
      v1::UpdateSweepRequest req;
      req.set_sweep_id(f->id);
      req.set_note(f->text);
      return Update(c, req, "sweep note");
    };
  });

  CLI::App* tag = sweep->add_subcommand("tag", "Add tags to the sweep (--remove: take them off)");
  tag->add_option("sweep", f->id, "Sweep id")->required();
  tag->add_option("tags", f->tags, "Tags: 1..64 characters of A-Z a-z 0-9 . _ : -")->required();
  tag->add_flag("--remove", f->remove, "Remove these tags instead");
  tag->callback([command, f] {
    command->action = [f](Client* c) {
      v1::UpdateSweepRequest req;
      req.set_sweep_id(f->id);
      for (const std::string& t : f->tags) {
        if (f->remove) {
          req.add_remove_tags(t);
        } else {
          req.add_add_tags(t);
        }
      }
      return Update(c, req, "sweep tag");
    };
  });

  CLI::App* rename = sweep->add_subcommand("rename", "Give the sweep a new name");
  rename->add_option("sweep", f->id, "Sweep id")->required();
  rename->add_option("name", f->name, "1..128 characters of A-Z a-z 0-9 . _ -")->required();
  rename->callback([command, f] {
    command->action = [f](Client* c) {
      v1::UpdateSweepRequest req;
      req.set_sweep_id(f->id);
      req.set_name(f->name);
      return Update(c, req, "sweep rename");
    };
  });

  CLI::App* archive = sweep->add_subcommand(
      "archive", "Hide the sweep from lists, keeping it (--undo: show it again)");
  archive->add_option("sweep", f->id, "Sweep id")->required();
  archive->add_flag("--undo", f->undo, "Take the sweep out of the archive");
  archive->callback([command, f] {
    command->action = [f](Client* c) {
      v1::UpdateSweepRequest req;
      req.set_sweep_id(f->id);
      req.set_archived(!f->undo);
      return Update(c, req, "sweep archive");
    };
  });

  CLI::App* del = sweep->add_subcommand(
      "delete", "Delete an ended sweep, its cells and its results (owner or admin)");
  del->add_option("sweep", f->id, "Sweep id")->required();
  del->add_flag("--yes", f->yes, "Do not ask; the sweep id is the confirmation");
  del->callback([command, f] {
    command->action = [f](Client* c) {
      std::string confirm = f->id;
      if (!f->yes) {
        // The confirmation is the id typed again, so that a half-pasted
        // command or a wrong one from the history deletes nothing.
        std::cerr << "Deleting sweep " << f->id << " removes its cells and results for good.\n"
                  << "Type the sweep id to confirm: " << std::flush;
        confirm.clear();
        std::getline(std::cin, confirm);
        if (confirm != f->id) {
          std::cerr << "ranksweep: sweep delete: not confirmed (got \"" << confirm
                    << "\"); nothing deleted\n";
          return static_cast<int>(kExitUsage);
        }
      }
      v1::DeleteSweepRequest req;
      req.set_sweep_id(f->id);
      req.set_confirm(confirm);
      v1::DeleteSweepResponse resp;
      auto ctx = c->Context();
      grpc::Status status = AdminStub(c)->DeleteSweep(ctx.get(), req, &resp);
      if (!status.ok()) return Report(c->globals(), status, "sweep delete");
      std::cout << "deleted sweep " << f->id << ": " << CountOf(resp.cells_deleted(), "cell")
                << ", " << CountOf(resp.results_deleted(), "result") << "\n";
      return static_cast<int>(kExitOk);
    };
  });

  CLI::App* retry = sweep->add_subcommand(
      "retry", "New attempts for the sweep's failed and/or cancelled cells; nothing else");
  retry->add_option("sweep", f->id, "Sweep id")->required();
  retry->add_flag("--failed", f->failed, "Retry the FAILED cells (without either flag: both)");
  retry->add_flag("--cancelled", f->cancelled, "Retry the CANCELLED cells");
  retry->callback([command, f] {
    command->action = [f](Client* c) {
      v1::RetrySweepRequest req;
      req.set_sweep_id(f->id);
      const bool both = !f->failed && !f->cancelled;
      req.set_failed(both || f->failed);
      req.set_cancelled(both || f->cancelled);
      v1::RetrySweepResponse resp;
      auto ctx = c->Context();
      grpc::Status status = AdminStub(c)->RetrySweep(ctx.get(), req, &resp);
      if (!status.ok()) return Report(c->globals(), status, "sweep retry");
      std::cout << "retrying " << CountOf(resp.cells_retried(), "cell") << " of " << f->id
                << "\n";
      return static_cast<int>(kExitOk);
    };
  });
}

absl::StatusOr<std::vector<v1::SweepInfo>> ListManaged(Client* c,
                                                       const v1::ListManagedSweepsRequest& req,
                                                       int* exit_code) {
  v1::ListManagedSweepsResponse resp;
  auto ctx = c->Context();
  grpc::Status status = AdminStub(c)->ListManagedSweeps(ctx.get(), req, &resp);
  if (!status.ok()) {
    *exit_code = Report(c->globals(), status, "list");
    return absl::UnknownError("reported");
  }
  std::vector<v1::SweepInfo> out;
  for (const v1::ManagedSweep& s : resp.sweeps()) out.push_back(s.sweep());
  return out;
}

}  // namespace ranksweep::client
