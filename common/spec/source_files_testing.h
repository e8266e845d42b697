// For tests that check a recipe of docs/ARCHITECTURE.md: which production
// files of the source tree name something (a kind, a metric).
#ifndef RANKSWEEP_COMMON_SPEC_SOURCE_FILES_TESTING_H_
#define RANKSWEEP_COMMON_SPEC_SOURCE_FILES_TESTING_H_

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace ranksweep::testing_support {

// The production files whose text contains `needle`, relative to the source
// tree (RANKSWEEP_SOURCE_DIR, which the test's CMake target defines): C++,
// proto, Python, JavaScript and HTML under the code's folders, without
// tests (a name containing "_test", or a `tests` folder), docs or build
// outputs.
// `dirs`: the folders searched; by default every folder of code, the
// benchmarks too.
inline std::set<std::string> FilesNaming(
    const std::string& needle,
    const std::vector<std::string>& dirs = {"common", "client", "server", "worker", "proto",
                                            "python", "bench"}) {
  namespace fs = std::filesystem;
  const fs::path root(RANKSWEEP_SOURCE_DIR);
  const std::set<std::string> extensions = {".cc", ".h", ".proto", ".py", ".js", ".html"};
  std::set<std::string> naming;
  for (const std::string& dir : dirs) {
    for (const fs::directory_entry& e : fs::recursive_directory_iterator(root / dir)) {
      const std::string rel = fs::relative(e.path(), root).string();
      const std::string name = e.path().filename().string();
      if (!e.is_regular_file() || name.find("_test") != std::string::npos ||
          rel.find("/tests/") != std::string::npos ||
          extensions.count(e.path().extension().string()) == 0) {
        continue;
      }
      std::ifstream in(e.path());
      std::stringstream text;
      text << in.rdbuf();
      if (text.str().find(needle) != std::string::npos) naming.insert(rel);
    }
  }
  return naming;
}

}  // namespace ranksweep::testing_support

#endif  // RANKSWEEP_COMMON_SPEC_SOURCE_FILES_TESTING_H_
