// The table of cuDNN entry points resolved by the loader. Engine sources call cuDNN only
// through api(), never by linking against libcudnn.
#pragma once

#include <cudnn_backend.h>

#include "engines/cudnn/loader.hpp"

namespace dnngraph::cudnn {

struct Api {
#define DNNGRAPH_CUDNN_FN(name) decltype(&::name) name = nullptr;
#define DNNGRAPH_CUDNN_OPT_FN(name) decltype(&::name) name = nullptr;
#include "engines/cudnn/api_functions.inc"
#undef DNNGRAPH_CUDNN_OPT_FN
#undef DNNGRAPH_CUDNN_FN
};

// The loaded table, or nullptr when load_info().loaded is false.
const Api* api();

}  // namespace dnngraph::cudnn
