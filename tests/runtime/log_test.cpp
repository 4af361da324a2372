// DNNGRAPH_LOG levels through a sink: which lines each level lets through.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dnngraph/dnngraph.hpp"

namespace dnngraph {
namespace {

struct Captured {
  std::vector<std::pair<LogLevel, std::string>> lines;
  LogLevel saved = log_level();
  Captured() {
    set_log_sink([this](LogLevel l, std::string_view m) { lines.emplace_back(l, std::string(m)); });
  }
  ~Captured() {
    set_log_sink(nullptr);
    set_log_level(saved);
  }
  bool has(LogLevel l, const std::string& part) const {
    for (const auto& [level, text] : lines)
      if (level == l && text.find(part) != std::string::npos) return true;
    return false;
  }
};

void build_small() {
  Graph g;
  g.set_name("logged").set_io_data_type(DataType::Float);
  auto a = g.tensor(ir::TensorAttrs().set_name("A").set_dim({2, 2}).set_stride({2, 1}));
  g.relu(a)->set_output(true);
  ASSERT_TRUE(g.build(Handle::create(Device::cpu()).value()).is_ok());
}

TEST(Log, LevelsFilterWhatReachesTheSink) {
  Captured c;
  set_log_level(LogLevel::Dispatch);
  build_small();
  EXPECT_TRUE(
      c.has(LogLevel::Dispatch, "graph 'logged' reference candidate 0 'reference': supported"));
  EXPECT_TRUE(c.has(LogLevel::Info, "graph 'logged': built plan 0 'reference'"));
  EXPECT_TRUE(c.has(LogLevel::Debug, "lowered onto engine 'reference'"));

  c.lines.clear();
  set_log_level(LogLevel::Info);
  build_small();
  EXPECT_TRUE(c.has(LogLevel::Info, "built plan"));
  for (const auto& [level, text] : c.lines) EXPECT_LE(level, LogLevel::Info) << text;

  c.lines.clear();
  set_log_level(LogLevel::Off);
  build_small();
  EXPECT_TRUE(c.lines.empty());
}

TEST(Log, LevelNames) {
  EXPECT_EQ(log_level_name(LogLevel::Warn), "warn");
  EXPECT_EQ(log_level_name(LogLevel::Dispatch), "dispatch");
}

}  // namespace
}  // namespace dnngraph
