function(dnngraph_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Werror -Wno-unused-parameter)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 14)
    # GCC 12 and 13 report false -Wrestrict positives inside std::string concatenation at -O2/-O3
    # (GCC bug 105651); the warning stays on for other compilers.
    target_compile_options(${target} PRIVATE -Wno-restrict)
  endif()
endfunction()

function(dnngraph_sanitize target)
  if(DNNGRAPH_SANITIZE STREQUAL "thread")
    target_compile_options(${target} PRIVATE -fsanitize=thread -fno-omit-frame-pointer)
    target_link_options(${target} PRIVATE -fsanitize=thread)
  elseif(DNNGRAPH_SANITIZE)
    target_compile_options(${target} PRIVATE -fsanitize=address,undefined -fno-omit-frame-pointer
                                             -fno-sanitize-recover=undefined)
    target_link_options(${target} PRIVATE -fsanitize=address,undefined)
  endif()
endfunction()
