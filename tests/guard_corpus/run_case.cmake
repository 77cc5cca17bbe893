# Runs one corpus case for CTest:
#   cmake -DTOOL=heapkit -DOPTS=a|b -DPROG=prog -DARGS=x|y -DRC=nonzero|N -DEXPECT=s1|s2 -P run_case.cmake
# Runs `TOOL guard OPTS... -- PROG ARGS...`, then checks the exit status
# (nonzero: any failure, including death by a signal; N: exactly N) and that
# every EXPECT string occurs in stdout+stderr. A case expected to exit 0
# must print no "heapkit guard:" report at all.
string(REPLACE "|" ";" opts "${OPTS}")
string(REPLACE "|" ";" args "${ARGS}")
string(REPLACE "|" ";" expect "${EXPECT}")
execute_process(COMMAND ${TOOL} guard ${opts} -- ${PROG} ${args}
  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc TIMEOUT 100)
set(all "${out}${err}")
message("---- exit status: ${rc}\n---- output:\n${all}----")
if(RC STREQUAL "nonzero")
  if(rc STREQUAL "0")
    message(FATAL_ERROR "expected a non-zero exit status, got 0")
  endif()
elseif(NOT rc STREQUAL "${RC}")
  message(FATAL_ERROR "expected exit status ${RC}, got '${rc}'")
endif()
foreach(s ${expect})
  string(FIND "${all}" "${s}" pos)
  if(pos EQUAL -1)
    message(FATAL_ERROR "expected the output to contain '${s}'")
  endif()
endforeach()
if(RC STREQUAL "0")
  string(FIND "${all}" "heapkit guard:" pos)
  if(NOT pos EQUAL -1)
    message(FATAL_ERROR "a clean run printed a heapkit guard report")
  endif()
endif()
