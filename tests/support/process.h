// The tests' names for the child-process helpers (common/subprocess.h) and
// the temporary directory (common/temp_dir.h): integration tests write
// `testing::Process`, `testing::RunCommand` and `testing::TempDir`.
#ifndef RANKSWEEP_TESTS_SUPPORT_PROCESS_H_
#define RANKSWEEP_TESTS_SUPPORT_PROCESS_H_

#include "common/subprocess.h"
#include "common/temp_dir.h"

namespace ranksweep::testing {

using ::ranksweep::TempDir;
using ::ranksweep::subprocess::CommandResult;
using ::ranksweep::subprocess::Process;
using ::ranksweep::subprocess::ReadFile;
using ::ranksweep::subprocess::RunCommand;

}  // namespace ranksweep::testing

#endif  // RANKSWEEP_TESTS_SUPPORT_PROCESS_H_
