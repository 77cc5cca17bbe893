# tests/check_windows_headers.cmake - the public headers keep to what MSVC
# and MinGW accept: every header alone and all together compile with
#   <mingw> -std=c11 -pedantic -Werror (and as C++ with <mingw++> -std=c++11 -pedantic)
#   clang --target=x86_64-pc-windows-msvc -fsyntax-only -std=c11 -pedantic -Werror
#   (and clang++ -std=c++14 in the same mode), where __GNUC__ is not
#   defined and _MSC_VER is: the headers' non-GNU branches are compiled.
# The MSVC target has no C library of its own here (no Windows SDK): the
# check runs freestanding (clang's stddef.h, stdint.h, stdbool.h) with two
# stand-in headers, stdlib.h and string.h, that declare just the functions
# the public headers use, with the C standard's signatures.
#   cmake -DINCLUDE_DIR=<include> -DWORK=<dir> [-DMINGW_CC=..] [-DMINGW_CXX=..]
#         [-DCLANG=..] [-DCLANGXX=..] -P check_windows_headers.cmake
file(MAKE_DIRECTORY ${WORK})
file(GLOB headers RELATIVE ${INCLUDE_DIR} ${INCLUDE_DIR}/heapkit/*.h)
list(SORT headers)
set(units "")
set(all "")
foreach(h ${headers})
  string(MAKE_C_IDENTIFIER "${h}" id)
  file(WRITE ${WORK}/${id}.c "#include \"${h}\"\nint main(void) { return 0; }\n")
  list(APPEND units ${WORK}/${id}.c)
  string(APPEND all "#include \"${h}\"\n")
endforeach()
file(WRITE ${WORK}/all.c "${all}int main(void) { return hk_version() == 0; }\n")
file(WRITE ${WORK}/all.cpp "${all}int main() { return hk_version() == 0; }\n")
list(APPEND units ${WORK}/all.c)
set(ran 0)
function(compile)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed: ${ARGN}\n${out}${err}")
  endif()
endfunction()
set(warn -Wall -Wextra -pedantic -Werror)
if(MINGW_CC)
  foreach(u ${units})
    compile(${MINGW_CC} -std=c11 ${warn} -I${INCLUDE_DIR} -fsyntax-only ${u})
  endforeach()
  math(EXPR ran "${ran} + 1")
endif()
if(MINGW_CXX)
  compile(${MINGW_CXX} -std=c++11 ${warn} -I${INCLUDE_DIR} -fsyntax-only ${WORK}/all.cpp)
  math(EXPR ran "${ran} + 1")
endif()
if(CLANG)
  file(WRITE ${WORK}/crt/stdlib.h "#pragma once\n#include <stddef.h>\n#ifdef __cplusplus\nextern \"C\" {\n#endif\n"
    "void *malloc(size_t);\nvoid *calloc(size_t, size_t);\nvoid *realloc(void *, size_t);\nvoid free(void *);\n"
    "void abort(void);\n#ifdef __cplusplus\n}\n#endif\n")
  file(WRITE ${WORK}/crt/string.h "#pragma once\n#include <stddef.h>\n#ifdef __cplusplus\nextern \"C\" {\n#endif\n"
    "void *memcpy(void *, const void *, size_t);\nvoid *memmove(void *, const void *, size_t);\n"
    "void *memset(void *, int, size_t);\nint memcmp(const void *, const void *, size_t);\n"
    "size_t strlen(const char *);\nint strcmp(const char *, const char *);\nchar *strdup(const char *);\n"
    "char *_strdup(const char *);\n#ifdef __cplusplus\n}\n#endif\n")
  set(msvc --target=x86_64-pc-windows-msvc -fsyntax-only -ffreestanding -isystem ${WORK}/crt -I${INCLUDE_DIR})
  foreach(u ${units})
    compile(${CLANG} ${msvc} -std=c11 ${warn} ${u})
  endforeach()
  if(CLANGXX)
    compile(${CLANGXX} ${msvc} -std=c++14 ${warn} ${WORK}/all.cpp)
  endif()
  math(EXPR ran "${ran} + 1")
endif()
if(ran EQUAL 0)
  message(FATAL_ERROR "no Windows compiler to check with")
endif()
message(STATUS "public headers: ${ran} Windows compiler modes clean")
