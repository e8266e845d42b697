// What the writers of per-seed rows (format.cc) and of grouped results
// (format_groups.cc) share: the axes' columns of a table, the axes' keys of
// a JSON object, and the close of a JSON array of one object per line.
//
// Internal to the CLI's writers (format*.cc).
#ifndef RANKSWEEP_CLIENT_FORMAT_INTERNAL_H_
#define RANKSWEEP_CLIENT_FORMAT_INTERNAL_H_

#include <cstddef>
#include <vector>

#include "absl/strings/ascii.h"
#include "client/format.h"
#include "nlohmann/json.hpp"

namespace ranksweep::client::format_internal {

// "]\n" after no item, "\n]\n" after the last one.
const char* JsonArrayClose(bool empty);

// Inserts the axes' columns into a table after its first `after` columns:
// the header (the names, upper-case in the tables people read), right-aligned,
// and each item's values from its recipe.
template <typename Item>
void InsertAxisColumns(const RecipeAxes& axes, size_t after, const std::vector<Item>& items,
                       bool upper_case, Table* t) {
  if (axes.empty()) return;
  for (size_t i = 0; i < axes.names.size(); ++i) {
    t->header.insert(t->header.begin() + static_cast<std::ptrdiff_t>(after + i),
                     upper_case ? absl::AsciiStrToUpper(axes.names[i]) : axes.names[i]);
    if (t->right_align.size() >= after + i) {
      t->right_align.insert(t->right_align.begin() + static_cast<std::ptrdiff_t>(after + i),
                            true);
    }
  }
  for (size_t r = 0; r < items.size(); ++r) {
    for (size_t i = 0; i < axes.names.size(); ++i) {
      t->rows[r].insert(t->rows[r].begin() + static_cast<std::ptrdiff_t>(after + i),
                        axes.Text(items[r].recipe(), i));
    }
  }
}

// The axes' values of `recipe` as keys of a JSON object.
void AddAxisKeys(const RecipeAxes& axes, int recipe, nlohmann::ordered_json* j);

}  // namespace ranksweep::client::format_internal

#endif  // RANKSWEEP_CLIENT_FORMAT_INTERNAL_H_
