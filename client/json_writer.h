// Proto messages as JSON by reflection, in the one form every JSON output of
// the CLI uses: every field printed, proto field names, enums by their short
// names ("DONE"), 64-bit integers as JSON numbers (jq and nlohmann-style
// readers expect numbers; MessageToJsonString prints them as strings), and a
// missing value as null: an unset message (the result of a failed cell), a
// split without sequences (the test split of a dataset without one), rank 0
// of a row or group (a head without a rank), an unset `optional` scalar (a
// metric a seed lacks); but a result's learning curve, sent only when asked
// for, is left out while unset. Doubles are written as
// nlohmann's dump() writes them (shortest round trip).
//
// No I/O, no state; thread-safe.
#ifndef RANKSWEEP_CLIENT_JSON_WRITER_H_
#define RANKSWEEP_CLIENT_JSON_WRITER_H_

#include <string>

#include "google/protobuf/message.h"
#include "nlohmann/json.hpp"

namespace ranksweep::client {

// Proto -> JSON by reflection, in that form (every field, proto field names,
// enums by short name, missing values null, 64-bit integers as numbers). MessageJsonTree builds an
// nlohmann tree, for output that adds fields of its own; AppendMessageJson
// writes the same text as MessageJsonTree(m).dump() straight into `out`,
// without the tree (the per-row form: ten times less work for 100,000 rows).
nlohmann::ordered_json MessageJsonTree(const google::protobuf::Message& m);
void AppendMessageJson(const google::protobuf::Message& m, std::string* out);

}  // namespace ranksweep::client

#endif  // RANKSWEEP_CLIENT_JSON_WRITER_H_
