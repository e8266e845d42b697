// A fresh directory under the system's temporary directory, removed with
// everything in it when the TempDir is destroyed. Used by the unit and
// integration tests for their SQLite files and logs, and by the benchmarks
// for theirs.
//
// Setting RANKSWEEP_KEEP_TEST_DIRS (to anything) keeps the directory, so a
// failed test's database or a benchmark's sweep can be inspected afterwards.
//
// Errors: a directory that cannot be created aborts the program (a test or a
// benchmark cannot run without it); removal errors are ignored.
// Thread-safety: path() and File() are const and safe from any thread.
#ifndef RANKSWEEP_COMMON_TEMP_DIR_H_
#define RANKSWEEP_COMMON_TEMP_DIR_H_

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

namespace ranksweep {

class TempDir {
 public:
  TempDir() {
    std::string tmpl =
        (std::filesystem::temp_directory_path() / "ranksweep-test-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) {
      perror("ranksweep: mkdtemp");
      abort();
    }
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ignored;
    if (std::getenv("RANKSWEEP_KEEP_TEST_DIRS") == nullptr) {
      std::filesystem::remove_all(path_, ignored);
    }
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // `name` inside the directory, e.g. File("store.db").
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace ranksweep

#endif  // RANKSWEEP_COMMON_TEMP_DIR_H_
