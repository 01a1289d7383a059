# Warnings, sanitizers and the layer helper shared by every target.

set(UMEM_WARNINGS -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion
                  -Wnon-virtual-dtor -Wold-style-cast -Wcast-align -Woverloaded-virtual)
# GCC 12 at -O3 warns -Wrestrict inside libstdc++'s std::string operator+ for code that has no
# overlap (GCC bug 105329, fixed in GCC 13): not a finding in umem's code.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  list(APPEND UMEM_WARNINGS -Wno-restrict)
endif()
if(UMEM_WERROR)
  list(APPEND UMEM_WARNINGS -Werror)
endif()

# After the configuration's own -g, so it wins; configurations without debug info get none.
if(UMEM_LINE_TABLES_ONLY)
  add_compile_options($<$<CONFIG:Debug,RelWithDebInfo>:-g1>)
endif()

if(UMEM_SANITIZE)
  add_compile_options(-fsanitize=${UMEM_SANITIZE} -fno-omit-frame-pointer
                      -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${UMEM_SANITIZE})
endif()

# umem_layer(NAME DEPS ...): a static, PIC library from NAME/src/**/*.cpp with NAME/include public.
function(umem_layer name)
  cmake_parse_arguments(L "" "" "DEPS;PRIVATE_DEPS;INSTALLED_HEADERS" ${ARGN})
  file(GLOB_RECURSE srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/*.cpp)
  if(NOT srcs)  # a layer whose issue has not landed yet
    set(srcs ${PROJECT_SOURCE_DIR}/cmake/empty.cpp)
  endif()
  add_library(umem_${name} STATIC ${srcs})
  target_include_directories(umem_${name} PUBLIC
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>)
  target_link_libraries(umem_${name} PUBLIC ${L_DEPS} PRIVATE ${L_PRIVATE_DEPS})
  target_compile_options(umem_${name} PRIVATE ${UMEM_WARNINGS})
  set_target_properties(umem_${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  # In position-independent code GCC treats every function with default visibility as replaceable
  # at run time, so it inlines none of them into their callers, not even within one file. umem's
  # functions are never replaced: libumem_torch.so exports only its C ABI (umem_torch.map), and
  # libumem.so's C++ functions are its API, not hooks.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(umem_${name} PRIVATE -fno-semantic-interposition)
  endif()
  # Only public headers are installed: those under a detail/ folder are internal (no public
  # header includes one; tests/install/check_install.sh compiles every installed header on its
  # own). INSTALLED_HEADERS (paths under include/) narrows a layer to those.
  if(L_INSTALLED_HEADERS)
    foreach(h ${L_INSTALLED_HEADERS})
      get_filename_component(where ${h} DIRECTORY)
      install(FILES ${CMAKE_CURRENT_SOURCE_DIR}/include/${h}
              DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/${where})
    endforeach()
  else()
    install(DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
            PATTERN detail EXCLUDE)
  endif()
endfunction()
