# UMEM_STATIC_TESTS: every executable links statically, so the VM suite (tests/vm) can run the
# test programs and umtopo inside a busybox initramfs that has no shared libraries at all.
#
# Debian ships .a files for gtest, libnuma and hwloc, but not for spdlog, fmt or libudev. So in
# static mode spdlog and fmt are used header-only, and hwloc's udev calls go to a stub
# (tests/vm/udev_stub.cpp) that makes hwloc skip udev. Linker warnings about getaddrinfo and
# dlopen in static glibc programs are expected: umem only dlopens ROCr, absent in the VM.
# Included from the top-level CMakeLists.txt after the find_package calls, before any target.
if(NOT UMEM_STATIC_TESTS)
  return()
endif()
if(UMEM_SANITIZE)
  message(FATAL_ERROR "UMEM_STATIC_TESTS cannot be combined with UMEM_SANITIZE: the sanitizer "
                      "runtimes are shared libraries. Use a separate build directory.")
endif()

# Executables only: the shared libumem and the ROCr test double stay shared libraries.
add_link_options($<$<STREQUAL:$<TARGET_PROPERTY:TYPE>,EXECUTABLE>:-static>)

# spdlog header-only, with fmt header-only. The imported spdlog::spdlog target is SHARED and
# every layer names it, so it is retargeted rather than renamed: its compile definitions become
# the header-only ones and its "library" an empty archive (a SHARED import must name a file).
set(_umem_empty_archive ${CMAKE_BINARY_DIR}/umem_static/libumem_empty.a)
file(WRITE ${_umem_empty_archive} "!<arch>\n")
set_target_properties(spdlog::spdlog PROPERTIES
  INTERFACE_COMPILE_DEFINITIONS "SPDLOG_FMT_EXTERNAL"
  INTERFACE_LINK_LIBRARIES "Threads::Threads;fmt::fmt-header-only"
  IMPORTED_LOCATION ${_umem_empty_archive})
get_target_property(_umem_spdlog_configs spdlog::spdlog IMPORTED_CONFIGURATIONS)
foreach(cfg IN LISTS _umem_spdlog_configs)
  set_target_properties(spdlog::spdlog PROPERTIES IMPORTED_LOCATION_${cfg} ${_umem_empty_archive})
endforeach()

# hwloc: the archive and what `pkg-config --static --libs hwloc` adds, with udev stubbed.
find_library(UMEM_HWLOC_STATIC libhwloc.a REQUIRED)
find_library(UMEM_NUMA_STATIC libnuma.a REQUIRED)
add_library(umem_udev_stub STATIC ${PROJECT_SOURCE_DIR}/tests/vm/udev_stub.cpp)
target_compile_options(umem_udev_stub PRIVATE ${UMEM_WARNINGS})
set_target_properties(PkgConfig::HWLOC PROPERTIES
  INTERFACE_LINK_LIBRARIES "${UMEM_HWLOC_STATIC};umem_udev_stub;m;Threads::Threads"
  INTERFACE_LINK_DIRECTORIES ""
  INTERFACE_LINK_OPTIONS "")
# umem_numa_lib (top-level CMakeLists.txt) links ${NUMA_LIBRARY}; this shadows the cache entry.
set(NUMA_LIBRARY ${UMEM_NUMA_STATIC})
