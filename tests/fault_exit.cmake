# tests/fault_exit.cmake - runs `[emulator] fault_exit_prog <case>` and checks
# its exit status (nonzero, or 0) and that its output holds every EXPECT
# string ("|"-separated); with RC=nonzero it must not print "survived".
#   cmake -DEMU=<emulator words, "|"-separated or empty> -DPROG=<exe> -DCASE=<case>
#         -DRC=nonzero|0 -DEXPECT=<a|b|c> -P fault_exit.cmake
string(REPLACE "|" ";" emu "${EMU}")
string(REPLACE "|" ";" expect "${EXPECT}")
execute_process(COMMAND ${emu} ${PROG} ${CASE} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
  TIMEOUT 120)
set(all "${out}${err}")
message("${all}")
message("exit status: ${rc}")
if(RC STREQUAL "nonzero")
  if(rc STREQUAL "0" OR NOT rc MATCHES "^-?[0-9]+$|[Aa]borted|[Ee]xception|[Ff]ault|[Vv]iolation|[Ss]ignal")
    message(FATAL_ERROR "expected a non-zero exit, got '${rc}'")
  endif()
  if(all MATCHES "survived")
    message(FATAL_ERROR "the program survived the bug")
  endif()
elseif(NOT rc STREQUAL "${RC}")
  message(FATAL_ERROR "expected exit status ${RC}, got '${rc}'")
endif()
foreach(e ${expect})
  string(FIND "${all}" "${e}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "output lacks \"${e}\"")
  endif()
endforeach()
