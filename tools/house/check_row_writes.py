#!/usr/bin/env python3
"""The episode engine is the one writer of an episode's record (issue 46):
no module but agent/ (the engine) and store/ (the rows' home) builds an
episodes, evaluations, turns or finals row to write. A row is built where its
struct is declared as a value (`store::TurnRow t;`, `TurnRow{...}`); reading
one (a pointer, a reference, a container of them) is not building it.
Tests and the store benchmarks (tools/bench/) write rows of their own and are
not modules.

usage: check_row_writes.py [ROOT]   exit 1 and a line per row built elsewhere."""
import os
import re
import sys

ROWS = ("EpisodeRow", "EvaluationRow", "TurnRow", "FinalRow")
ALLOWED = ("agent/", "store/", "tests/", "tools/bench/", "build/")
# `store::TurnRow t;`, `TurnRow t = ...`, `TurnRow t{`, `TurnRow{...}`, `put(TurnRow(`
BUILT = re.compile(r"\b(?:store::)?(" + "|".join(ROWS) + r")(?:\s+[A-Za-z_]\w*\s*[;={(]|\s*[{(])")


def writes(root):
    """{path: [line numbers]} of rows built outside agent/ and store/."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        for name in filenames:
            if not name.endswith((".cpp", ".hpp", ".h", ".cc")):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root).replace(os.sep, "/")
            if rel.startswith(ALLOWED):
                continue
            with open(path, encoding="utf-8", errors="replace") as f:
                for n, line in enumerate(f, 1):
                    code = line.split("//", 1)[0]
                    if BUILT.search(code):
                        found.setdefault(rel, []).append(n)
    return found


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    found = writes(os.path.normpath(root))
    for rel, lines in sorted(found.items()):
        for n in lines:
            print(f"{rel}:{n}: an episode/evaluation/turn/final row built outside agent/ and store/")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
