# Every third-party dependency, found in one place.
find_package(Threads REQUIRED)
find_package(OpenMP REQUIRED COMPONENTS CXX)
# nlohmann-json, xxHash and CLI11 are header-only: the system's copy when CMake finds one (the
# Debian packages of scripts/setup.sh), else a pinned release downloaded at configure time
# (FetchContent), so `pip install .` also builds on a machine without them. A GPU machine
# without either can carry the headers in DNNGRAPH_EXTRA_INCLUDE_DIR.
#
# The pinned versions are Debian 12's (the same as the system packages the tests run with).
# Each download names the upstream release first, then the same version's orig tarball in the
# pool of the Debian archive this machine's apt already uses (cmake/debian_mirror.cmake; or
# -DDNNGRAPH_DEBIAN_MIRROR=URL): the two are the same bytes, pinned by one SHA256, so a machine
# that reaches only Debian's archive still builds.
include(FetchContent)
list(APPEND CMAKE_MODULE_PATH ${CMAKE_CURRENT_LIST_DIR})  # FindxxHash.cmake
include(debian_mirror)
dnngraph_debian_mirror(_dnngraph_deb)
set(_dnngraph_pool "")
if(_dnngraph_deb)
  set(_dnngraph_pool "${_dnngraph_deb}/pool/main")
endif()
find_path(DNNGRAPH_JSON_INCLUDE_DIR nlohmann/json.hpp PATHS ${DNNGRAPH_EXTRA_INCLUDE_DIR} NO_DEFAULT_PATH)
if(DNNGRAPH_JSON_INCLUDE_DIR)
  add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED)
  target_include_directories(nlohmann_json::nlohmann_json INTERFACE ${DNNGRAPH_JSON_INCLUDE_DIR})
else()
  find_package(nlohmann_json 3.10 QUIET)
  if(NOT nlohmann_json_FOUND)
    message(STATUS "dnngraph: nlohmann-json not found on this system: downloading v3.11.2 "
                   "(FetchContent; "
                   "without network access install the Debian package nlohmann-json3-dev)")
  endif()
  set(_urls https://github.com/nlohmann/json/archive/refs/tags/v3.11.2.tar.gz)
  if(_dnngraph_pool)
    list(APPEND _urls ${_dnngraph_pool}/n/nlohmann-json3/nlohmann-json3_3.11.2.orig.tar.gz)
  endif()
  FetchContent_Declare(nlohmann_json
    URL ${_urls}
    URL_HASH SHA256=d69f9deb6a75e2580465c6c4c5111b89c4dc2fa94e3a85fcd2ffcd9a143d9273
    DOWNLOAD_EXTRACT_TIMESTAMP TRUE
    FIND_PACKAGE_ARGS 3.10)
  FetchContent_MakeAvailable(nlohmann_json)
endif()

# xxHash (XXH3-128 for fingerprints), used header-only.
find_package(xxHash QUIET)
if(NOT xxHash_FOUND)
  message(STATUS "dnngraph: xxHash not found on this system: downloading v0.8.1 (FetchContent; "
                 "without network access install the Debian package libxxhash-dev)")
endif()
set(_urls https://github.com/Cyan4973/xxHash/archive/refs/tags/v0.8.1.tar.gz)
if(_dnngraph_pool)
  list(APPEND _urls ${_dnngraph_pool}/x/xxhash/xxhash_0.8.1.orig.tar.gz)
endif()
FetchContent_Declare(xxHash
  URL ${_urls}
  URL_HASH SHA256=3bb6b7d6f30c591dd65aaaff1c8b7a5b94d81687998ca9400082c739a690436c
  DOWNLOAD_EXTRACT_TIMESTAMP TRUE
  SOURCE_SUBDIR no-cmake  # only the header is used: populate, add no subproject
  FIND_PACKAGE_ARGS)  # cmake/FindxxHash.cmake
FetchContent_MakeAvailable(xxHash)
if(NOT TARGET xxHash::xxhash)  # downloaded
  add_library(xxHash::xxhash INTERFACE IMPORTED)
  target_include_directories(xxHash::xxhash SYSTEM INTERFACE ${xxhash_SOURCE_DIR})
endif()
add_library(dnngraph_xxhash INTERFACE)
target_link_libraries(dnngraph_xxhash INTERFACE xxHash::xxhash)
target_compile_definitions(dnngraph_xxhash INTERFACE XXH_INLINE_ALL)

# SQLite for the plan cache on disk; without it the plan cache is kept in memory only.
find_path(DNNGRAPH_SQLITE_INCLUDE_DIR sqlite3.h HINTS ${DNNGRAPH_EXTRA_INCLUDE_DIR})
find_library(DNNGRAPH_SQLITE_LIBRARY NAMES sqlite3 libsqlite3.so.0)
if(DNNGRAPH_SQLITE_INCLUDE_DIR AND DNNGRAPH_SQLITE_LIBRARY)
  message(STATUS "dnngraph: plan cache on disk ON (${DNNGRAPH_SQLITE_LIBRARY})")
  set(DNNGRAPH_HAVE_SQLITE ON)
else()
  message(STATUS "dnngraph: plan cache on disk OFF (SQLite not found)")
  set(DNNGRAPH_HAVE_SQLITE OFF)
endif()

# CUDA runtime and cuDNN headers (cuDNN itself is dlopen'd at run time).
set(DNNGRAPH_HAVE_CUDA OFF)
if(NOT DNNGRAPH_CUDA STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  # cuDNN's pip package (nvidia-cudnn-*) ships the headers in the interpreter's site-packages.
  if(NOT Python_EXECUTABLE)
    find_package(Python 3.9 QUIET COMPONENTS Interpreter)
  endif()
  execute_process(COMMAND "${Python_EXECUTABLE}" -c "import site;print(site.getsitepackages()[0])"
                  OUTPUT_VARIABLE _site OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  find_path(DNNGRAPH_CUDNN_INCLUDE_DIR cudnn_backend.h
            HINTS $ENV{CUDNN_INCLUDE_DIR} ${CUDAToolkit_INCLUDE_DIRS} ${_site}/nvidia/cudnn/include
                  ${_site}/nvidia/cu13/include /usr/include)
  if(CUDAToolkit_FOUND AND DNNGRAPH_CUDNN_INCLUDE_DIR AND EXISTS ${PROJECT_SOURCE_DIR}/src/engines/cudnn/engine.cpp)
    set(DNNGRAPH_HAVE_CUDA ON)
    message(STATUS "dnngraph: cuDNN engine ON (headers in ${DNNGRAPH_CUDNN_INCLUDE_DIR})")
  elseif(DNNGRAPH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "DNNGRAPH_CUDA=ON but the CUDA toolkit, cudnn_backend.h or the engine sources were not found")
  else()
    message(STATUS "dnngraph: cuDNN engine OFF (no CUDA toolkit or cuDNN headers)")
  endif()
endif()

if(DNNGRAPH_BUILD_TESTS)
  if(DNNGRAPH_GTEST_SOURCE_DIR)
    set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
    add_subdirectory(${DNNGRAPH_GTEST_SOURCE_DIR} ${PROJECT_BINARY_DIR}/_gtest EXCLUDE_FROM_ALL)
    if(NOT TARGET GTest::gtest_main)  # GoogleTest >= 1.11 defines these itself
      add_library(GTest::gtest_main ALIAS gtest_main)
      add_library(GTest::gtest ALIAS gtest)
    endif()
  else()
    find_package(GTest REQUIRED)
  endif()
endif()
if(DNNGRAPH_BUILD_BENCH)
  find_package(benchmark QUIET)
  if(NOT benchmark_FOUND)
    message(STATUS "dnngraph: Google Benchmark not found, CPU benchmarks skipped")
  endif()
endif()
if(DNNGRAPH_BUILD_TOOLS)
  find_path(DNNGRAPH_CLI11_INCLUDE_DIR CLI/CLI.hpp PATHS ${DNNGRAPH_EXTRA_INCLUDE_DIR} NO_DEFAULT_PATH)
  if(DNNGRAPH_CLI11_INCLUDE_DIR)
    add_library(CLI11::CLI11 INTERFACE IMPORTED)
    target_include_directories(CLI11::CLI11 INTERFACE ${DNNGRAPH_CLI11_INCLUDE_DIR})
  else()
    find_package(CLI11 QUIET)
    # Debian repacks CLI11 (2.1.2+ds: other bytes than upstream's 2.1.2 archive), so one pin
    # cannot cover both: Debian's when this machine has a Debian archive, else upstream's.
    if(_dnngraph_pool)
      set(_cli11 2.1.2+ds ${_dnngraph_pool}/c/cli11/cli11_2.1.2+ds.orig.tar.xz
                 8143d20b688e98ccce8e24562d3b68e5f47c12e896c42c7ca8553dbde5bed55d)
    else()
      set(_cli11 2.5.0 https://github.com/CLIUtils/CLI11/archive/refs/tags/v2.5.0.tar.gz
                 17e02b4cddc2fa348e5dbdbb582c59a3486fa2b2433e70a0c3bacb871334fd55)
    endif()
    list(GET _cli11 0 _v)
    list(GET _cli11 1 _url)
    list(GET _cli11 2 _sha)
    if(NOT CLI11_FOUND)
      message(STATUS "dnngraph: CLI11 not found on this system: downloading ${_v} (FetchContent; "
                     "without network access install the Debian package libcli11-dev)")
    endif()
    FetchContent_Declare(CLI11
      URL ${_url}
      URL_HASH SHA256=${_sha}
      DOWNLOAD_EXTRACT_TIMESTAMP TRUE
      SOURCE_SUBDIR no-cmake
      FIND_PACKAGE_ARGS)
    FetchContent_MakeAvailable(CLI11)
    if(NOT TARGET CLI11::CLI11)
      add_library(CLI11::CLI11 INTERFACE IMPORTED)
      target_include_directories(CLI11::CLI11 SYSTEM INTERFACE ${cli11_SOURCE_DIR}/include)
    endif()
  endif()
endif()
