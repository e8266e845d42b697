// "Did you mean": the closest of the words a place accepts to one that was
// mistyped, for every binary's errors (subcommands, flags, enum values,
// preset names). Pure functions; no state.
#ifndef RANKSWEEP_COMMON_DID_YOU_MEAN_H_
#define RANKSWEEP_COMMON_DID_YOU_MEAN_H_

#include <string>
#include <vector>

namespace ranksweep {

// Edits (insert, delete, substitute, swap two neighbours) from a to b.
int EditDistance(const std::string& a, const std::string& b);

// The choice closest to `word` (compared in lower case) when it is close
// enough to be a slip: at most one edit for words up to 4 letters, two up to
// 8, three beyond (ties: the first in `choices`). Empty when none is.
std::string ClosestMatch(const std::string& word, const std::vector<std::string>& choices);

// "; did you mean \"submit\"?" for ClosestMatch, "" when there is none: to
// append to an error message.
std::string DidYouMeanSuffix(const std::string& word, const std::vector<std::string>& choices);

}  // namespace ranksweep

#endif  // RANKSWEEP_COMMON_DID_YOU_MEAN_H_
