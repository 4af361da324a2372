#include "common.hpp"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "dnngraph/engines/cudnn.hpp"
#include "dnngraph/ir/json.hpp"
#include "dnngraph/system.hpp"

namespace dnngraph_cli {

std::optional<std::string> read_text(const std::string& path, std::string& error) {
  std::ostringstream os;
  if (path == "-") {
    os << std::cin.rdbuf();
    if (std::cin.bad()) {
      error = "cannot read standard input";
      return std::nullopt;
    }
    return os.str();
  }
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
  os << in.rdbuf();
  if (in.bad()) {
    error = "cannot read '" + path + "'";
    return std::nullopt;
  }
  return os.str();
}

int fail(std::string_view command, int rc, const std::string& what) {
  std::cerr << "dnngraph" << (command.empty() ? "" : " ") << command << ": " << what << "\n";
  return rc;
}

int load_graph(const std::string& path, dnngraph::ir::Graph& g, std::string_view command,
               bool validate, std::string_view hint) {
  std::string error;
  const std::optional<std::string> text = read_text(path, error);
  if (!text) return fail(command, kUsage, error);
  if (dnngraph::Status s = dnngraph::ir::from_json(*text, g); !s)
    return fail(command, kInvalid, path + ": " + s.to_string());
  if (!validate) return kOk;
  if (dnngraph::Status s = g.validate(); !s)
    return fail(command, kInvalid, path + ": " + s.to_string() + std::string(hint));
  return kOk;
}

std::string default_device() {
  return dnngraph::cudnn_info().loaded && !dnngraph::system_info().gpus.empty() ? "cuda" : "cpu";
}

dnngraph::Result<dnngraph::HandlePtr> open_handle(const dnngraph::Device& dev,
                                                  std::string_view cpu_flag) {
  auto handle = dnngraph::Handle::create(dev);
  if (handle || dev.kind != dnngraph::Device::Kind::CUDA) return handle;
  const std::string why = dnngraph::system_info().gpu_error;  // the reason, without the C++ hint
  if (why.empty()) return handle;
  return dnngraph::make_error(dnngraph::ErrorCode::NotSupported, "no GPU can be used: ", why,
                              "; use ", cpu_flag, " for the reference engine");
}

}  // namespace dnngraph_cli
