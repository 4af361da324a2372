# dnngraph_debian_mirror(OUT): the Debian archive this machine's apt uses (the first
# ".../debian" URI in /etc/apt/sources.list or sources.list.d), or DNNGRAPH_DEBIAN_MIRROR when
# set; empty on a machine without either. cmake/dependencies.cmake downloads the pinned
# header-only dependencies from its pool when their upstream release pages cannot be reached.
set(DNNGRAPH_DEBIAN_MIRROR "" CACHE STRING
    "Debian archive (URL ending in /debian) for the dependency downloads; default: apt's")

function(dnngraph_debian_mirror out)
  set(mirror "${DNNGRAPH_DEBIAN_MIRROR}")
  if(NOT mirror)
    file(GLOB lists /etc/apt/sources.list /etc/apt/sources.list.d/*.list
         /etc/apt/sources.list.d/*.sources)
    foreach(f IN LISTS lists)
      # One-line "deb [opts] URI suite ..." entries and deb822 "URIs: URI ..." fields.
      file(STRINGS "${f}" lines REGEX "^[ \t]*(deb[ \t]|URIs:)")
      foreach(line IN LISTS lines)
        if(line MATCHES "(https?://[^ \t]+/debian)/?([ \t]|$)")
          set(mirror "${CMAKE_MATCH_1}")
          break()
        endif()
      endforeach()
      if(mirror)
        break()
      endif()
    endforeach()
  endif()
  string(REGEX REPLACE "/+$" "" mirror "${mirror}")
  set(${out} "${mirror}" PARENT_SCOPE)
endfunction()
