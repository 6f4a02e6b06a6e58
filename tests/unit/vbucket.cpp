/// Tests of the umbrella headers vbucket/vbucket.hpp and vbucket/run.hpp: together they reach
/// every core header of every folder (directly, through a folder's umbrella or through another
/// header) and include no adapter.
#include "vbucket/vbucket.hpp"
#include "vbucket/run.hpp"

#include <doctest/doctest.h>

#include <filesystem>  // std::filesystem
#include <fstream>     // std::ifstream
#include <set>         // std::set
#include <string>      // std::string
#include <vector>      // std::vector

namespace {

namespace fs = std::filesystem;

/// include/vbucket/ of this source tree (tests/data is VBUCKET_TEST_DATA_DIR).
fs::path core_dir() {
  return fs::path(VBUCKET_TEST_DATA_DIR) / ".." / ".." / "include" / "vbucket";
}

/// The quoted includes of a header, as paths relative to include/vbucket/ (a relative include
/// names a file beside the header).
std::vector<std::string> includes_of(const fs::path& dir, const fs::path& header) {
  std::ifstream in(header);
  REQUIRE_MESSAGE(in.good(), "cannot read " << header.string());
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("#include \"", 0) != 0) continue;
    std::string name = line.substr(10, line.find('"', 10) - 10);
    if (name.rfind("vbucket/", 0) == 0)
      name = name.substr(8);
    else
      name = fs::relative(header.parent_path() / name, dir).lexically_normal().generic_string();
    out.push_back(name);
  }
  return out;
}

}  // namespace

TEST_CASE("vbucket: the two umbrellas reach every core header and no adapter") {
  // vbucket.hpp (sampling and loading) and run.hpp (the run: spec, plan, ledger, audit).
  const fs::path dir = core_dir();
  REQUIRE(fs::is_directory(dir));
  std::set<std::string> reached;
  std::vector<std::string> todo{"vbucket.hpp", "run.hpp"};
  while (!todo.empty()) {
    const std::string h = todo.back();
    todo.pop_back();
    if (!reached.insert(h).second) continue;
    CAPTURE(h);
    REQUIRE_MESSAGE(fs::exists(dir / h), h << " is included but is not a core header");
    for (const std::string& i : includes_of(dir, dir / h)) todo.push_back(i);
  }
  // Every header of every folder (detail/'s internals are reached where they are used).
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (entry.path().extension() != ".hpp") continue;
    const std::string name = fs::relative(entry.path(), dir).generic_string();
    if (name.rfind("detail/", 0) == 0) continue;
    CAPTURE(name);
    CHECK(reached.count(name) == 1);
  }
  for (const char* adapter : {"json/", "fmt/", "eigen/", "ffmpeg/", "cuda/", "mpi/"})
    for (const std::string& h : reached) CHECK(h.rfind(adapter, 0) != 0);
}
