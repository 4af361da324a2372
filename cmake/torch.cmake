# Finds the PyTorch of ${Python_EXECUTABLE} (or python3) for dnngraph_torch.
#   DNNGRAPH_BUILD_TORCH = AUTO (default: build when torch imports), ON (fail without it), OFF.
# Sets DNNGRAPH_HAVE_TORCH and the imported target dnngraph::libtorch.
#
# We locate torch through torch.utils.cmake_prefix_path (its install tree) but do not call
# find_package(Torch): for CUDA wheels that config requires nvcc and a CUDA toolkit of a
# matching version, which CPU machines (CI) do not have. dnngraph_torch needs neither: it
# reaches CUDA streams through c10's device-generic interface, so the include directories,
# the C++ ABI flag and the libraries are all it takes (as torch.utils.cpp_extension does).
set(DNNGRAPH_HAVE_TORCH OFF)
if(DNNGRAPH_BUILD_TORCH STREQUAL "OFF")
  return()
endif()
if(Python_EXECUTABLE)
  set(_dg_py "${Python_EXECUTABLE}")
else()
  find_program(_dg_py NAMES python3 python)
endif()
execute_process(
  COMMAND "${_dg_py}" -c "import torch,os;print(torch.utils.cmake_prefix_path);print(int(torch._C._GLIBCXX_USE_CXX11_ABI));print(torch.__version__)"
  OUTPUT_VARIABLE _dg_torch_out ERROR_VARIABLE _dg_torch_err RESULT_VARIABLE _dg_torch_rc
  OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT _dg_torch_rc EQUAL 0)
  if(DNNGRAPH_BUILD_TORCH STREQUAL "ON")
    message(FATAL_ERROR "DNNGRAPH_BUILD_TORCH=ON but `${_dg_py} -c 'import torch'` failed: "
                        "${_dg_torch_err}Install torch (python3 -m pip install torch) or set "
                        "-DDNNGRAPH_BUILD_TORCH=OFF.")
  endif()
  message(STATUS "dnngraph: PyTorch ops (dnngraph_torch) skipped: torch does not import with "
                 "${_dg_py} (install torch and reconfigure to build them)")
  return()
endif()
string(REPLACE "\n" ";" _dg_torch_out "${_dg_torch_out}")
list(GET _dg_torch_out 0 _dg_torch_cmake)
list(GET _dg_torch_out 1 _dg_torch_abi)
list(GET _dg_torch_out 2 DNNGRAPH_TORCH_VERSION)
get_filename_component(_dg_torch_root "${_dg_torch_cmake}/../.." ABSOLUTE)
set(DNNGRAPH_TORCH_ROOT "${_dg_torch_root}")
set(_dg_torch_libs)
foreach(lib torch torch_cpu c10)
  find_library(DNNGRAPH_TORCH_LIB_${lib} ${lib} PATHS "${_dg_torch_root}/lib" NO_DEFAULT_PATH)
  if(NOT DNNGRAPH_TORCH_LIB_${lib})
    message(FATAL_ERROR "dnngraph: torch ${DNNGRAPH_TORCH_VERSION} at ${_dg_torch_root} has no lib${lib}.so")
  endif()
  list(APPEND _dg_torch_libs ${DNNGRAPH_TORCH_LIB_${lib}})
endforeach()
add_library(dnngraph_libtorch INTERFACE)
add_library(dnngraph::libtorch ALIAS dnngraph_libtorch)
target_include_directories(dnngraph_libtorch SYSTEM INTERFACE
  "${_dg_torch_root}/include" "${_dg_torch_root}/include/torch/csrc/api/include")
target_compile_definitions(dnngraph_libtorch INTERFACE _GLIBCXX_USE_CXX11_ABI=${_dg_torch_abi})
target_link_libraries(dnngraph_libtorch INTERFACE ${_dg_torch_libs})
set(DNNGRAPH_HAVE_TORCH ON)
message(STATUS "dnngraph: PyTorch ops (dnngraph_torch) ON, torch ${DNNGRAPH_TORCH_VERSION} at ${_dg_torch_root}")
