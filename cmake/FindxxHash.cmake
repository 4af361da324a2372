# Finds the xxHash header (Debian: libxxhash-dev, which ships no CMake package) and defines the
# header-only target xxHash::xxhash.
find_path(xxHash_INCLUDE_DIR xxhash.h HINTS ${DNNGRAPH_EXTRA_INCLUDE_DIR})
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(xxHash REQUIRED_VARS xxHash_INCLUDE_DIR)
if(xxHash_FOUND AND NOT TARGET xxHash::xxhash)
  add_library(xxHash::xxhash INTERFACE IMPORTED)
  target_include_directories(xxHash::xxhash SYSTEM INTERFACE ${xxHash_INCLUDE_DIR})
endif()
mark_as_advanced(xxHash_INCLUDE_DIR)
