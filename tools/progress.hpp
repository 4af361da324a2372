// The command line's progress bar on stderr: `[#####     ] 3/10 label`, redrawn in place.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace dnngraph::tools {

// `done` of `total` steps finished; the bar is full when done == total.
inline void progress_bar(int64_t done, int64_t total, const std::string& label) {
  constexpr int kWidth = 30;
  const int filled = total > 0 ? static_cast<int>(kWidth * done / total) : kWidth;
  std::fprintf(stderr, "\r[%.*s%.*s] %lld/%lld %-40.40s", filled, "##############################",
               kWidth - filled, "                              ", static_cast<long long>(done),
               static_cast<long long>(total), label.c_str());
  std::fflush(stderr);
}

}  // namespace dnngraph::tools
