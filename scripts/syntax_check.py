#!/usr/bin/env python3
"""Runs every compile of a build directory's compile_commands.json with
-fsyntax-only: the front end's diagnostics (clang's -Wthread-safety among
them) without code generation, in parallel. Exits 1 naming each file that
failed, with its diagnostics.

    scripts/syntax_check.py BUILD_DIR [-j N]
"""
import argparse
import concurrent.futures
import json
import os
import shlex
import subprocess
import sys


def syntax_only(argv):
    """The compile without its output file, dependency file or code generation.

    CMake leaves the compiler launcher (ccache) out of compile_commands.json,
    and ccache would not cache a compile without output anyway.
    """
    out = []
    skip = False
    for a in argv:
        if skip:
            skip = False
            continue
        if a == "-o":
            skip = True
            continue
        if a in ("-MD", "-MMD"):
            continue
        if a in ("-MT", "-MF"):
            skip = True
            continue
        out.append(a)
    return out + ["-fsyntax-only"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build_dir")
    ap.add_argument("-j", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()
    with open(os.path.join(args.build_dir, "compile_commands.json")) as f:
        entries = json.load(f)
    if not entries:
        print(f"syntax_check: no compile in {args.build_dir}/compile_commands.json", file=sys.stderr)
        return 1

    def run(e):
        argv = e["arguments"] if "arguments" in e else shlex.split(e["command"])
        p = subprocess.run(syntax_only(argv), cwd=e["directory"], capture_output=True, text=True)
        return e["file"], p.returncode, p.stdout + p.stderr

    failed = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.j) as pool:
        for file, rc, text in pool.map(run, entries):
            if text.strip():
                sys.stdout.write(text)
            if rc != 0:
                failed.append(file)
    print(f"syntax_check: {len(entries)} files, {len(failed)} failed")
    for file in failed:
        print(f"  failed: {file}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
