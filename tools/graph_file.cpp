#include "graph_file.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace dnngraph_cli {

std::optional<std::string> read_text(const std::string& path, std::string& error) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    error = "'" + path + "' is a directory";
    return std::nullopt;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = "cannot open '" + path + "' for reading";
    return std::nullopt;
  }
  std::ostringstream os;
  os << in.rdbuf();
  if (in.bad()) {
    error = "cannot read '" + path + "'";
    return std::nullopt;
  }
  return os.str();
}

}  // namespace dnngraph_cli
