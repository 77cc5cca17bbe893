# bench/icount_dumps.awk - reads callgrind dump files written around single
# calls (bench/icount.h: the costs zeroed before the call, dumped after it
# with the call's label as the trigger) and prints one line per call:
#   [PREFIX] LABEL INSTRUCTIONS
# separated by OFS (PREFIX from -v prefix=..., left out when empty). Used by
# bench/icount.sh and bench/bounds.sh, which give the files in dump order
# when the order matters. Dumps without a client-request trigger (the final
# dump at exit) are skipped.
/^desc: Trigger: Client Request: / {
    k = $0
    sub(/^desc: Trigger: Client Request: /, "", k)
}
/^totals: / {
    if (k != "") {
        if (prefix == "") print k, $2
        else print prefix, k, $2
    }
    k = ""
}
