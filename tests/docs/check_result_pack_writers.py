#!/usr/bin/python3
"""Only InsertPack adds rows to result_packs (docs/ARCHITECTURE.md, "The reply
cache"): no trigger moves a sweep's results version when a row is added, so
a second statement that adds rows would leave the reply cache serving rows
older than the store's.

Walks the C++ files of server/ under --repo, tests left out, and prints every
file whose SQL inserts into result_packs other than --allowed (the writer,
server/core/results/result_schema.cc, and the schema, whose migration 6
filled the table once); exits 1 when there is one, 0 otherwise.
"""

import argparse
import os
import re
import sys

ALLOWED = ("server/core/results/result_schema.cc", "server/core/schema.cc")
INSERT = re.compile(r"\b(INSERT|REPLACE)\b[^;]*?\bINTO\s+result_packs\b", re.IGNORECASE)


def writers(repo):
    """Paths (relative to repo) of the non-test C++ files of server/ that
    insert into result_packs, sorted."""
    out = []
    for root, _, files in os.walk(os.path.join(repo, "server")):
        for name in files:
            if not name.endswith((".cc", ".h")) or "_test" in name:
                continue
            path = os.path.join(root, name)
            with open(path, encoding="utf-8") as f:
                # String literals split over lines join up: "INSERT " "INTO x".
                text = re.sub(r'"\s*\n\s*"', "", f.read())
            if INSERT.search(text):
                out.append(os.path.relpath(path, repo))
    return sorted(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", required=True, help="the repository's root")
    parser.add_argument("--allowed", nargs="*", default=list(ALLOWED),
                        help="files that may insert into result_packs")
    args = parser.parse_args()
    found = writers(args.repo)
    others = [p for p in found if p not in args.allowed]
    for path in others:
        print(f"{path} inserts into result_packs: add rows through InsertPack "
              "(server/core/results/result_schema.cc), which moves the results version")
    if not others:
        print(f"result_packs gets rows only from: {', '.join(found)}")
    return 1 if others else 0


if __name__ == "__main__":
    sys.exit(main())
