// Finds and loads cuDNN 9 at first use, in this order:
//   1. a libcudnn.so.9 already loaded in the process (e.g. by PyTorch): reuse it;
//   2. $DNNGRAPH_CUDNN_PATH (the library file, or a folder holding libcudnn.so.9);
//   3. the pip package nvidia-cudnn-cu* in a Python site-packages folder: first those found
//      from the environment (PYTHONPATH, VIRTUAL_ENV, CONDA_PREFIX, venvs on PATH), then, as a
//      last resort, the folders python3 itself reports;
//   4. the system's search path (ld.so.cache, LD_LIBRARY_PATH).
// Every entry point is resolved into one table (api_functions.inc); a missing one, or a major
// version other than 9, makes the load fail with a message saying what was tried.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "engines/cudnn/api.hpp"

namespace dnngraph::cudnn {
namespace {

constexpr const char* kSoname = "libcudnn.so.9";
constexpr int64_t kMajor = 9;

namespace fs = std::filesystem;

struct Loaded {
  CudnnLoadInfo info;
  Api api;
};

std::vector<std::string> split_paths(const char* s) {
  std::vector<std::string> out;
  if (!s) return out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ':'))
    if (!item.empty()) out.push_back(item);
  return out;
}

// site-packages folders under a Python prefix (a venv or conda env): lib/python3.*/site-packages.
void add_prefix_sites(const fs::path& prefix, std::vector<fs::path>& sites) {
  std::error_code ec;
  fs::path lib = prefix / "lib";
  if (!fs::is_directory(lib, ec)) return;
  for (const auto& e : fs::directory_iterator(lib, ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("python3", 0) == 0) {
      fs::path sp = e.path() / "site-packages";
      if (fs::is_directory(sp, ec)) sites.push_back(sp);
    }
  }
}

std::vector<fs::path> env_site_dirs() {
  std::vector<fs::path> sites;
  for (const auto& p : split_paths(std::getenv("PYTHONPATH"))) sites.emplace_back(p);
  for (const char* var : {"VIRTUAL_ENV", "CONDA_PREFIX"})
    if (const char* v = std::getenv(var)) add_prefix_sites(v, sites);
  // A venv whose bin/ is on PATH without being activated (the GPU machine's torch venv).
  for (const auto& p : split_paths(std::getenv("PATH"))) {
    fs::path bin(p);
    if (bin.filename() == "bin") add_prefix_sites(bin.parent_path(), sites);
  }
  return sites;
}

// Last resort: ask the python3 on PATH for its site folders.
std::vector<fs::path> python_site_dirs() {
  std::vector<fs::path> sites;
  FILE* f = popen(
      "python3 -c \"import "
      "site,sys;print('\\n'.join(site.getsitepackages()+[site.getusersitepackages()]))\" "
      "2>/dev/null",
      "r");
  if (!f) return sites;
  char line[4096];
  while (std::fgets(line, sizeof line, f)) {
    std::string s(line);
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    if (!s.empty()) sites.emplace_back(s);
  }
  pclose(f);
  return sites;
}

// cuDNN 9's libcudnn.so.9 dispatches to sub-libraries found by soname; loading them first from
// the same folder makes that work without LD_LIBRARY_PATH.
void preload_sublibraries(const fs::path& dir) {
  static constexpr const char* kSubs[] = {"libcudnn_graph.so.9",
                                          "libcudnn_engines_precompiled.so.9",
                                          "libcudnn_engines_runtime_compiled.so.9",
                                          "libcudnn_heuristic.so.9",
                                          "libcudnn_ops.so.9",
                                          "libcudnn_cnn.so.9",
                                          "libcudnn_adv.so.9"};
  std::error_code ec;
  for (const char* s : kSubs) {
    fs::path p = dir / s;
    if (fs::exists(p, ec)) (void)dlopen(p.c_str(), RTLD_NOW | RTLD_GLOBAL);
  }
}

void* open_file(const fs::path& file, std::vector<std::string>& tried) {
  std::error_code ec;
  if (!fs::exists(file, ec)) {
    tried.push_back(file.string() + " (absent)");
    return nullptr;
  }
  preload_sublibraries(file.parent_path());
  void* h = dlopen(file.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!h) {
    const char* e = dlerror();
    tried.push_back(file.string() + " (" + (e ? e : "dlopen failed") + ")");
  }
  return h;
}

void* find_library(std::vector<std::string>& tried) {
  // 1. Already in the process.
  if (void* h = dlopen(kSoname, RTLD_NOW | RTLD_NOLOAD)) return h;
  tried.push_back(std::string(kSoname) + " already loaded (no)");
  // 2. Explicit path.
  if (const char* p = std::getenv("DNNGRAPH_CUDNN_PATH"); p && *p) {
    fs::path path(p);
    std::error_code ec;
    if (fs::is_directory(path, ec)) path /= kSoname;
    if (void* h = open_file(path, tried)) return h;
  }
  // 3. pip packages.
  auto try_sites = [&](const std::vector<fs::path>& sites) -> void* {
    for (const auto& site : sites)
      for (const char* sub : {"nvidia/cudnn/lib", "nvidia/cu13/lib", "nvidia/cu12/lib"}) {
        fs::path f = site / sub / kSoname;
        std::error_code ec;
        if (!fs::exists(f, ec)) continue;
        if (void* h = open_file(f, tried)) return h;
      }
    return nullptr;
  };
  if (void* h = try_sites(env_site_dirs())) return h;
  if (void* h = try_sites(python_site_dirs())) return h;
  tried.push_back("Python site-packages nvidia/cudnn/lib (none found)");
  // 4. System.
  if (void* h = dlopen(kSoname, RTLD_NOW | RTLD_GLOBAL)) return h;
  const char* e = dlerror();
  tried.push_back(std::string(kSoname) + " on the system path (" + (e ? e : "not found") + ")");
  return nullptr;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : "; ") + x;
  return s;
}

Loaded* load() {
  auto* L = new Loaded();  // lives for the process: cuDNN is never unloaded
  std::vector<std::string> tried;
  void* h = find_library(tried);
  if (!h) {
    L->info.error = "cuDNN 9 was not found; tried: " + join(tried) +
                    ". Set DNNGRAPH_CUDNN_PATH to libcudnn.so.9 or install nvidia-cudnn-cu13";
    return L;
  }
  std::string missing;
#define DNNGRAPH_CUDNN_FN(name)                                       \
  L->api.name = reinterpret_cast<decltype(&::name)>(dlsym(h, #name)); \
  if (!L->api.name) missing += (missing.empty() ? "" : ", ") + std::string(#name);
#define DNNGRAPH_CUDNN_OPT_FN(name) \
  L->api.name = reinterpret_cast<decltype(&::name)>(dlsym(h, #name));
#include "engines/cudnn/api_functions.inc"
#undef DNNGRAPH_CUDNN_OPT_FN
#undef DNNGRAPH_CUDNN_FN
  Dl_info di{};
  if (L->api.cudnnGetVersion && dladdr(reinterpret_cast<void*>(L->api.cudnnGetVersion), &di) &&
      di.dli_fname)
    L->info.path = di.dli_fname;
  if (!missing.empty()) {
    L->info.error = "cuDNN at '" + L->info.path + "' lacks: " + missing;
    return L;
  }
  L->info.version = static_cast<int64_t>(L->api.cudnnGetVersion());
  if (L->info.version / 10000 != kMajor) {
    L->info.error = "cuDNN at '" + L->info.path + "' has version " +
                    std::to_string(L->info.version) + " but dnngraph needs major version 9";
    return L;
  }
  L->info.loaded = true;
  return L;
}

Loaded& loaded() {
  static Loaded* L = load();  // thread-safe static initialization
  return *L;
}

}  // namespace

const CudnnLoadInfo& load_info() { return loaded().info; }

const Api* api() {
  Loaded& L = loaded();
  return L.info.loaded ? &L.api : nullptr;
}

}  // namespace dnngraph::cudnn
