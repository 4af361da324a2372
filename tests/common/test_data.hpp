// Files of tests/data (DNNGRAPH_TEST_DATA overrides the folder CMake gives), read whole with
// trailing newlines removed.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace dnngraph::test {

inline std::string read_test_data(const char* name) {
  const char* env = std::getenv("DNNGRAPH_TEST_DATA");
  std::filesystem::path dir = env ? env : DNNGRAPH_TEST_DATA_DIR;
  std::ifstream in(dir / name, std::ios::binary);
  EXPECT_TRUE(in.good()) << "missing tests/data/" << name;
  std::ostringstream os;
  os << in.rdbuf();
  std::string s = os.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

}  // namespace dnngraph::test
