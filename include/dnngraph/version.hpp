#pragma once

namespace dnngraph {
inline constexpr const char* kVersion = "0.4.0";
const char* version();
}  // namespace dnngraph
