// Reading a QueryResults reply sent as columns (QueryResultsRequest.columns,
// message ResultColumns): back into one ResultRow per row.
#ifndef RANKSWEEP_PROTO_COLUMNS_H_
#define RANKSWEEP_PROTO_COLUMNS_H_

#include "absl/status/status.h"
#include "ranksweep/v1/ranksweep.pb.h"

namespace ranksweep {

// Appends the rows of `response->columns()` to `response->rows()` (on the
// response's arena, if it has one) and clears the columns. A reply without
// columns (grouped, or from a coordinator that predates them and sent rows)
// is left as it is. An empty metric list reads as its empty value on every
// row. InvalidArgument naming the field when the columns do not fit
// together (a list of the wrong length, an index past its table); the rows
// are then left unchanged.
absl::Status RowsFromColumns(v1::QueryResultsResponse* response);

}  // namespace ranksweep

#endif  // RANKSWEEP_PROTO_COLUMNS_H_
