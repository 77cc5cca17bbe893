#!/bin/sh
# fuzz/run.sh BUILD_DIR SECONDS [TARGET...] - runs each libFuzzer target
# (default: all of build/fuzz/*_libfuzzer) for SECONDS, starting from its
# seed corpus (fuzz/corpus/<name>/, copied to a working corpus under the
# build directory so new inputs do not land in the repository), and prints
# one line per target: executions, coverage, features, result.
set -u
build=$1
secs=$2
shift 2
src=$(cd "$(dirname "$0")" && pwd)
cd "$build/fuzz" || exit 1
targets=$*
[ -n "$targets" ] || targets=$(ls *_libfuzzer 2>/dev/null | sed 's/_libfuzzer$//')
status=0
for t in $targets; do
  work=corpus-work/$t
  mkdir -p "$work"
  [ -d "$src/corpus/$t" ] && cp -n "$src/corpus/$t"/* "$work"/ 2>/dev/null
  log=$t.log
  ./${t}_libfuzzer -max_total_time="$secs" -print_final_stats=1 -timeout=20 -rss_limit_mb=4096 \
      "$work" >"$log" 2>&1
  rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 | grep -o '[0-9]*')
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -n 1 | grep -o '[0-9]*')
  if [ $rc -eq 0 ]; then res=clean; else res="FAILED (exit $rc, see $build/fuzz/$log)"; status=1; fi
  printf '%-12s %s s  execs %s  cov %s  ft %s  %s\n' "$t" "$secs" "${execs:-?}" "${cov:-?}" "${ft:-?}" "$res"
done
exit $status
