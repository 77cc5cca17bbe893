#!/usr/bin/env python3
"""Compiles every C example of README.md, so the README stays true.

Each ```c block becomes one translation unit: top-level items (includes,
typedefs, structs, static functions and variables, which start at column 0)
stay at file scope and the remaining statements go into main(). Blocks are
compiled, not run (some show mistakes on purpose, such as the guard's
overflow).

usage: check_readme.py README.md CC INCLUDE_DIR WORK_DIR
"""
import os
import re
import subprocess
import sys

TOP = re.compile(r"^(#|typedef\b|struct\b|static\b|enum\b|union\b)")


def split_block(lines):
    top, body = [], []
    i = 0
    while i < len(lines):
        line = lines[i]
        if TOP.match(line):
            # a top-level item: up to a line ending it at depth 0
            depth = 0
            while True:
                cur = lines[i]
                top.append(cur)
                depth += cur.count("{") - cur.count("}")
                code = re.sub(r"/\*.*?\*/|//.*$", "", cur).rstrip()
                done = cur.startswith("#") or (depth <= 0 and code.endswith((";", "}")))
                i += 1
                if done or i >= len(lines):
                    break
            continue
        body.append(line)
        i += 1
    return top, body


def main():
    readme, cc, include, work = sys.argv[1:5]
    os.makedirs(work, exist_ok=True)
    text = open(readme, encoding="utf-8").read()
    blocks = re.findall(r"```c\n(.*?)```", text, flags=re.S)
    if not blocks:
        print("no C blocks in README.md")
        return 1
    failed = 0
    for n, block in enumerate(blocks):
        top, body = split_block(block.splitlines())
        src = ["#include <stdio.h>", "#include <string.h>"] + top
        src += ["int main(void) {"] + ["    " + l for l in body] + ["    return 0;", "}"]
        path = os.path.join(work, "readme_block_%d.c" % n)
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(src) + "\n")
        cmd = [cc, "-std=c11", "-fsyntax-only", "-Wall", "-Wno-unused-variable",
               "-Wno-unused-but-set-variable", "-Wno-unused-function", "-Werror", "-I", include, path]
        r = subprocess.run(cmd, capture_output=True, text=True)
        first = block.strip().splitlines()[0] if block.strip() else ""
        if r.returncode != 0:
            failed += 1
            print("README block %d (%s) does not compile:\n%s" % (n, first, r.stderr))
        else:
            print("README block %d compiles (%s)" % (n, first))
    print("%d passed, %d failed" % (len(blocks) - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
