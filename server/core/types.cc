#include "server/core/types.h"

namespace ranksweep::server {

const char* Name(SweepState s) {
  switch (s) {
    case SweepState::kRunning: return "running";
    case SweepState::kDone: return "done";
    case SweepState::kFailed: return "failed";
    case SweepState::kCancelled: return "cancelled";
  }
  return "unknown";
}

const char* Name(CellState s) {
  switch (s) {
    case CellState::kPending: return "pending";
    case CellState::kLeased: return "leased";
    case CellState::kDone: return "done";
    case CellState::kFailed: return "failed";
    case CellState::kCancelled: return "cancelled";
    case CellState::kPruned: return "pruned";
    case CellState::kInvalid: return "invalid";
  }
  return "unknown";
}

}  // namespace ranksweep::server
