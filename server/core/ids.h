// Random ids for rows whose ids are shown to users: "sw-" + 8 hex digits for
// a sweep, "wk-" + 8 for a worker. Random, so that they do not reveal how
// busy the service is; the callers check a new one is free in their table.
//
// Thread-safety: safe from any thread.
#ifndef RANKSWEEP_SERVER_CORE_IDS_H_
#define RANKSWEEP_SERVER_CORE_IDS_H_

#include <string>

namespace ranksweep::server {

// `prefix` and eight lowercase hex digits.
std::string RandomId(const char* prefix);

}  // namespace ranksweep::server

#endif  // RANKSWEEP_SERVER_CORE_IDS_H_
