#!/usr/bin/python3
"""No source file of the programs is over 600 lines (docs/ARCHITECTURE.md,
"Layers": a newcomer reads one file at a time).

Walks server/, client/ and worker/ under --repo (C++, proto, Python,
JavaScript, HTML, CSS and CMake files, tests included) and prints every
file over --max-lines with its count; exits 1 when there is one, 0 otherwise.
"""

import argparse
import os
import sys

FOLDERS = ("server", "client", "worker")
EXTENSIONS = (".cc", ".h", ".proto", ".py", ".js", ".html", ".css", ".cmake", ".txt")


def long_files(repo, max_lines):
    """(path relative to repo, lines) of every file over max_lines, sorted."""
    out = []
    for folder in FOLDERS:
        for root, _, files in os.walk(os.path.join(repo, folder)):
            for name in files:
                if not name.endswith(EXTENSIONS):
                    continue
                path = os.path.join(root, name)
                with open(path, "rb") as f:
                    lines = sum(1 for _ in f)
                if lines > max_lines:
                    out.append((os.path.relpath(path, repo), lines))
    return sorted(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", required=True, help="the repository's root")
    parser.add_argument("--max-lines", type=int, default=600, help="the most lines a file has")
    args = parser.parse_args()
    found = long_files(args.repo, args.max_lines)
    for path, lines in found:
        print(f"{path}: {lines} lines, over {args.max_lines}: split it by what it does")
    if not found:
        print(f"every file of {', '.join(FOLDERS)} is at most {args.max_lines} lines")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
