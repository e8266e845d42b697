// Text helpers for tests that read what a command or renderer wrote.
#ifndef RANKSWEEP_TESTS_SUPPORT_TEXT_H_
#define RANKSWEEP_TESTS_SUPPORT_TEXT_H_

#include <string>

namespace ranksweep::testing {

// How many times `what` occurs in `text`, overlapping occurrences included.
inline int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace ranksweep::testing

#endif  // RANKSWEEP_TESTS_SUPPORT_TEXT_H_
