// Small status-propagation macros, named as Abseil's internal ones are.
// Debian 12's Abseil ships absl::Status but not these helpers.
#ifndef RANKSWEEP_COMMON_STATUS_MACROS_H_
#define RANKSWEEP_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define RS_STATUS_CONCAT_INNER_(a, b) a##b
#define RS_STATUS_CONCAT_(a, b) RS_STATUS_CONCAT_INNER_(a, b)

// Evaluates `expr` (an absl::Status); returns it from the enclosing function
// when it is not OK.
#define RETURN_IF_ERROR(expr)                      \
  do {                                             \
    ::absl::Status rs_status_ = (expr);            \
    if (!rs_status_.ok()) return rs_status_;       \
  } while (0)

// ASSIGN_OR_RETURN(lhs, expr): evaluates `expr` (an absl::StatusOr<T>);
// returns its status when not OK, else moves the value into `lhs`, which may
// be a declaration (`auto x`) or an existing lvalue.
#define ASSIGN_OR_RETURN(lhs, expr) \
  RS_ASSIGN_OR_RETURN_IMPL_(RS_STATUS_CONCAT_(rs_statusor_, __LINE__), lhs, expr)

#define RS_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()

#endif  // RANKSWEEP_COMMON_STATUS_MACROS_H_
