# The library's layers as CMake targets, linked only downward, so that an include that points up
# does not build (tests/layering checks it):
#
#   runtime   src/runtime/          the Graph pipeline, system_info      (dnngraph/graph.hpp, system.hpp)
#   engines   src/engines/reference/, src/engines/cudnn/  (each its own target; neither sees the other)
#   engine_api src/engines/*.cpp    the Engine interface, Handle, the registry (dnngraph/engines/)
#   ir        src/ir/               tensors, ops, graphs, validation, JSON, fingerprint (dnngraph/ir/)
#   core      src/core/             Status, DataType, element storage    (dnngraph/status.hpp, ...)
#
# python/ and tools/ sit above and see only the public headers. Each layer compiles against an
# include folder of its own, made at configure time under ${PROJECT_BINARY_DIR}/layers/ out of
# symbolic links to the headers of that layer (public: include/dnngraph/...; private: src/...);
# linking a lower layer adds that layer's folder. The layers are OBJECT libraries folded into
# the one libdnngraph.so.

set(DNNGRAPH_LAYER_ROOT ${PROJECT_BINARY_DIR}/layers)
file(REMOVE_RECURSE ${DNNGRAPH_LAYER_ROOT})

# dnngraph_layer_link(<layer> <path under the layer's folder> <file or folder it points to>)
function(dnngraph_layer_link layer rel target)
  set(link ${DNNGRAPH_LAYER_ROOT}/${layer}/${rel})
  get_filename_component(parent ${link} DIRECTORY)
  file(MAKE_DIRECTORY ${parent})
  file(CREATE_LINK ${target} ${link} SYMBOLIC)
endfunction()

# dnngraph_layer(<name> SOURCES ... [PUBLIC_LINKS rel=target ...] [PRIVATE_LINKS rel=target ...]
#                [LAYERS lower layers ...])
# PUBLIC_LINKS are seen by the layers above that link this one; PRIVATE_LINKS only by its own
# sources.
function(dnngraph_layer name)
  cmake_parse_arguments(L "" "" "SOURCES;PUBLIC_LINKS;PRIVATE_LINKS;LAYERS" ${ARGN})
  add_library(dnngraph_${name} OBJECT ${L_SOURCES})
  dnngraph_set_warnings(dnngraph_${name})
  dnngraph_sanitize(dnngraph_${name})
  foreach(kind PUBLIC PRIVATE)
    set(root ${DNNGRAPH_LAYER_ROOT}/${name}/${kind})
    file(MAKE_DIRECTORY ${root})
    foreach(pair ${L_${kind}_LINKS})
      string(REPLACE "=" ";" pair ${pair})
      list(GET pair 0 rel)
      list(GET pair 1 target)
      dnngraph_layer_link(${name}/${kind} ${rel} ${target})
    endforeach()
    target_include_directories(dnngraph_${name} ${kind} $<BUILD_INTERFACE:${root}>)
  endforeach()
  # What its sources see: its own folders and the public folders of the layers below, kept for
  # tests/layering (which compiles probes as if they were this layer's sources).
  set(public_dirs ${DNNGRAPH_LAYER_ROOT}/${name}/PUBLIC)
  foreach(lower ${L_LAYERS})
    target_link_libraries(dnngraph_${name} PUBLIC dnngraph_${lower})
    get_property(lower_dirs GLOBAL PROPERTY DNNGRAPH_LAYER_${lower}_PUBLIC_DIRS)
    list(APPEND public_dirs ${lower_dirs})
  endforeach()
  list(REMOVE_DUPLICATES public_dirs)
  set_property(GLOBAL PROPERTY DNNGRAPH_LAYER_${name}_PUBLIC_DIRS ${public_dirs})
  set_property(GLOBAL PROPERTY DNNGRAPH_LAYER_${name}_DIRS
               ${DNNGRAPH_LAYER_ROOT}/${name}/PRIVATE ${public_dirs})
endfunction()

set(_inc ${PROJECT_SOURCE_DIR}/include/dnngraph)
set(_src ${PROJECT_SOURCE_DIR}/src)

# core: the top-level headers that every layer uses; every other top-level header is runtime's.
set(DNNGRAPH_CORE_HEADERS status.hpp types.hpp storage.hpp version.hpp log.hpp)
set(_core_links)
foreach(h ${DNNGRAPH_CORE_HEADERS})
  list(APPEND _core_links dnngraph/${h}=${_inc}/${h})
endforeach()
file(GLOB _top_headers RELATIVE ${_inc} CONFIGURE_DEPENDS ${_inc}/*.hpp)
set(_runtime_links)
foreach(h ${_top_headers})
  if(NOT h IN_LIST DNNGRAPH_CORE_HEADERS)
    list(APPEND _runtime_links dnngraph/${h}=${_inc}/${h})
  endif()
endforeach()

file(GLOB _core_src CONFIGURE_DEPENDS ${_src}/core/*.cpp)
dnngraph_layer(core SOURCES ${_core_src} PUBLIC_LINKS ${_core_links})

file(GLOB _ir_src CONFIGURE_DEPENDS ${_src}/ir/*.cpp ${_src}/ir/ops/*.cpp)
dnngraph_layer(ir SOURCES ${_ir_src} LAYERS core
  PUBLIC_LINKS dnngraph/ir=${_inc}/ir
  PRIVATE_LINKS ir=${_src}/ir)
target_link_libraries(dnngraph_ir PRIVATE nlohmann_json::nlohmann_json dnngraph_xxhash)

# engine_api: the interface every engine implements, handles, the registry. Its private header
# (engines/registry.hpp) is seen by the engines, which register, and the runtime, which asks.
file(GLOB _api_src CONFIGURE_DEPENDS ${_src}/engines/*.cpp)
file(GLOB _api_private RELATIVE ${_src} CONFIGURE_DEPENDS ${_src}/engines/*.hpp)
set(_api_private_links)
foreach(h ${_api_private})
  list(APPEND _api_private_links ${h}=${_src}/${h})
endforeach()
# Its public headers are include/dnngraph/engines/*.hpp but cudnn.hpp, which only the cuDNN
# layer sees (and python/ and tools/, through the installed include folder).
file(GLOB _api_public RELATIVE ${_inc}/engines CONFIGURE_DEPENDS ${_inc}/engines/*.hpp)
list(REMOVE_ITEM _api_public cudnn.hpp)
set(_api_public_links)
foreach(h ${_api_public})
  list(APPEND _api_public_links dnngraph/engines/${h}=${_inc}/engines/${h})
endforeach()
dnngraph_layer(engine_api SOURCES ${_api_src} LAYERS ir
  PUBLIC_LINKS ${_api_public_links} ${_api_private_links})
target_link_libraries(dnngraph_engine_api PRIVATE nlohmann_json::nlohmann_json dnngraph_xxhash)

file(GLOB _ref_src CONFIGURE_DEPENDS ${_src}/engines/reference/*.cpp)
dnngraph_layer(reference SOURCES ${_ref_src} LAYERS engine_api
  PRIVATE_LINKS engines/reference=${_src}/engines/reference)
target_link_libraries(dnngraph_reference PRIVATE OpenMP::OpenMP_CXX)

# cudnn: the whole folder with CUDA, else only unavailable.cpp (dnngraph/engines/cudnn.hpp's
# answers without it).
if(DNNGRAPH_HAVE_CUDA)
  file(GLOB _cudnn_src CONFIGURE_DEPENDS ${_src}/engines/cudnn/*.cpp)
  list(REMOVE_ITEM _cudnn_src ${_src}/engines/cudnn/unavailable.cpp)
else()
  set(_cudnn_src ${_src}/engines/cudnn/unavailable.cpp)
endif()
dnngraph_layer(cudnn SOURCES ${_cudnn_src} LAYERS engine_api
  PRIVATE_LINKS engines/cudnn=${_src}/engines/cudnn
                dnngraph/engines/cudnn.hpp=${_inc}/engines/cudnn.hpp)
# Only the cuDNN layer sees CUDA: the engine interface asks it for the GPUs and their
# properties (src/engines/registry.hpp, DeviceProvider).
if(DNNGRAPH_HAVE_CUDA)
  target_compile_definitions(dnngraph_cudnn PRIVATE DNNGRAPH_WITH_CUDA=1)
  target_include_directories(dnngraph_cudnn SYSTEM PRIVATE ${DNNGRAPH_CUDNN_INCLUDE_DIR})
  target_link_libraries(dnngraph_cudnn PRIVATE CUDA::cudart_static)
endif()

file(GLOB _runtime_src CONFIGURE_DEPENDS ${_src}/runtime/*.cpp)
dnngraph_layer(runtime SOURCES ${_runtime_src} LAYERS engine_api
  PUBLIC_LINKS ${_runtime_links}
  PRIVATE_LINKS runtime=${_src}/runtime)
target_link_libraries(dnngraph_runtime PRIVATE nlohmann_json::nlohmann_json dnngraph_xxhash)

set(DNNGRAPH_LAYERS core ir engine_api reference cudnn runtime)
