// Column lists named once. A statement that reads several columns lists
// their names (or expressions) in the order of an enum, builds its SQL from
// that list, and reads each column by its enumerator, so that no code counts
// columns and a static_assert keeps the list and the enum in step:
//
//   enum Col : int { kId, kState, kCount };
//   static const std::string* sql =
//       NewSelect<kCount>({"id", "state"}, "FROM cells WHERE id = :id");
//   ... q.ColumnInt(kState) ...
//
// Thread-safety: pure functions.
#ifndef RANKSWEEP_SERVER_CORE_SQL_COLUMNS_H_
#define RANKSWEEP_SERVER_CORE_SQL_COLUMNS_H_

#include <cstddef>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"

namespace ranksweep::server {

// "a, b, c" from `names`, which must have one entry per value of the enum
// that indexes them (`kCount` values; checked at compile time).
template <int kCount, typename Name, size_t N>
std::string ColumnList(const Name (&names)[N]) {
  static_assert(N == kCount, "one column name per enum value");
  return absl::StrJoin(names, ", ");
}

// "SELECT <ColumnList(names)> <rest>", newly allocated: callers keep it in
// a function-local static, so that each statement's text is built once.
template <int kCount, size_t N>
const std::string* NewSelect(const absl::string_view (&names)[N], absl::string_view rest) {
  return new std::string(
      absl::StrCat("SELECT ", ColumnList<kCount>(names), rest.empty() ? "" : " ", rest));
}

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_CORE_SQL_COLUMNS_H_
