// Every statement the server writes by hand names its parameters
// (":sweep_id", Statement::Bind(":sweep_id", ...)): no "?1" in SQL text and
// no Bind(1, ...) in server/. The only numbered parameters are those of the
// column lists generated from the result schema (result_schema.h), bound
// by index constants, never by a literal.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace ranksweep::server {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> NumberedParameters(const fs::path& file) {
  static const std::regex kNumbered(R"((\?[0-9])|(Bind(Blob|Null)?\(\s*[0-9]))");
  std::ifstream in(file);
  std::vector<std::string> hits;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (std::regex_search(line, kNumbered)) {
      hits.push_back(file.string() + ":" + std::to_string(n) + ": " + line);
    }
  }
  return hits;
}

TEST(NamedBindsTest, NoHandWrittenStatementInTheServerNumbersItsParameters) {
  const fs::path server = fs::path(RANKSWEEP_SOURCE_DIR) / "server";
  ASSERT_TRUE(fs::is_directory(server)) << server;
  int files = 0;
  std::vector<std::string> hits;
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(server)) {
    const std::string name = e.path().filename().string();
    if (!e.is_regular_file() || name.find("_test") != std::string::npos) continue;
    if (e.path().extension() != ".cc" && e.path().extension() != ".h") continue;
    ++files;
    for (std::string& hit : NumberedParameters(e.path())) hits.push_back(std::move(hit));
  }
  EXPECT_GT(files, 40);  // the walk found the server's sources
  std::ostringstream all;
  for (const std::string& hit : hits) all << hit << "\n";
  EXPECT_TRUE(hits.empty()) << all.str();
}

TEST(NamedBindsTest, TheCheckFindsANumberedParameter) {
  const fs::path file = fs::temp_directory_path() /
                        ("named-binds-probe-" + std::to_string(::getpid()));
  {
    std::ofstream out(file);
    out << "q.Prepare(\"SELECT 1 FROM sweeps WHERE id = ?1\");\n"
        << "q.Bind(\":id\", id);\n"
        << "q.Bind(2, id);\n";
  }
  const std::vector<std::string> hits = NumberedParameters(file);
  fs::remove(file);
  ASSERT_EQ(hits.size(), 2u);
  EXPECT_NE(hits[0].find(":1: "), std::string::npos) << hits[0];
  EXPECT_NE(hits[1].find(":3: "), std::string::npos) << hits[1];
}

}  // namespace
}  // namespace ranksweep::server
