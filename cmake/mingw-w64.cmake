# cmake/mingw-w64.cmake - cross-build heapkit for 64-bit Windows with
# MinGW-w64 (Debian: gcc-mingw-w64-x86-64, g++-mingw-w64-x86-64) and run
# its tests under Wine (wine64):
#
#   cmake -S . -B build-win -DCMAKE_TOOLCHAIN_FILE=cmake/mingw-w64.cmake
#   cmake --build build-win -j2 && ctest --test-dir build-win
#
# (`make check-windows` does exactly that.) The "-posix" flavour of the
# compilers is preferred: it ships winpthreads, which the multi-threaded
# tests use (the library itself uses SRWLOCKs and FLS, no pthreads).
# Executables are linked statically (libgcc, winpthreads) so Wine needs no
# MinGW DLL on its path.
#
# Variables (set on the command line with -D to override):
#   HEAPKIT_MINGW_PREFIX  x86_64-w64-mingw32
#   HEAPKIT_WINE          the Wine loader (/usr/lib/wine/wine64, else wine64 or wine on PATH)

set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR x86_64)

if(NOT HEAPKIT_MINGW_PREFIX)
  set(HEAPKIT_MINGW_PREFIX x86_64-w64-mingw32)
endif()

find_program(HK_MINGW_CC NAMES ${HEAPKIT_MINGW_PREFIX}-gcc-posix ${HEAPKIT_MINGW_PREFIX}-gcc REQUIRED)
find_program(HK_MINGW_CXX NAMES ${HEAPKIT_MINGW_PREFIX}-g++-posix ${HEAPKIT_MINGW_PREFIX}-g++ REQUIRED)
find_program(HK_MINGW_RC NAMES ${HEAPKIT_MINGW_PREFIX}-windres)
set(CMAKE_C_COMPILER ${HK_MINGW_CC})
set(CMAKE_CXX_COMPILER ${HK_MINGW_CXX})
if(HK_MINGW_RC)
  set(CMAKE_RC_COMPILER ${HK_MINGW_RC})
endif()

set(CMAKE_FIND_ROOT_PATH /usr/${HEAPKIT_MINGW_PREFIX})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# Static runtime: the .exe files run under Wine without MinGW DLLs.
set(CMAKE_EXE_LINKER_FLAGS_INIT "-static")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "-static")

# Tests and examples run through Wine (CTest prefixes every test command
# whose program is a target of this build with the emulator).
if(NOT HEAPKIT_WINE)
  find_program(HEAPKIT_WINE NAMES wine64 wine PATHS /usr/lib/wine /usr/lib64/wine NO_DEFAULT_PATH)
  if(NOT HEAPKIT_WINE)
    find_program(HEAPKIT_WINE NAMES wine64 wine)
  endif()
endif()
# The Wine prefix lives in the build directory (made at the first run, a
# few seconds); WINEDEBUG=-all keeps Wine's own diagnostics out of the
# tests' output. Set HEAPKIT_WINEPREFIX to share one prefix between builds.
if(NOT HEAPKIT_WINEPREFIX)
  set(HEAPKIT_WINEPREFIX ${CMAKE_BINARY_DIR}/wineprefix)
endif()
if(HEAPKIT_WINE)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${CMAKE_COMMAND} -E env WINEPREFIX=${HEAPKIT_WINEPREFIX} WINEDEBUG=-all
    ${HEAPKIT_WINE})
endif()
