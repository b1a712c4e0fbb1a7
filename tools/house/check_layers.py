#!/usr/bin/env python3
"""The C++ house's floors, checked against its #include lines.

Each top-level module may include only modules on a lower floor (and
itself): every arrow points down, so there is no circle and no upward import.
The floors are the ones docs/ARCHITECTURE.md ("The rooms") draws. The worker's Python
package has its own check (tests/evaluator/worker/test_imports.py).

    tools/house/check_layers.py            # prints the arrows; exits 1 on one that points up
    tools/house/check_layers.py --quiet    # only what is wrong
"""
import collections
import os
import re
import sys

# Highest first. Modules on one floor may not include each other.
FLOORS = [
    ["tools"],
    ["daemon"],
    ["agent"],
    ["prompts"],
    ["reports", "evaluator", "llm_clients"],
    ["store", "config"],
    ["util"],
]
FLOOR = {m: len(FLOORS) - i for i, row in enumerate(FLOORS) for m in row}
# Arrows that are down but allowed only from some rooms of a module: the
# evaluator reaches the store only through the evaluation queue
# (evaluator/remote/); the rest of it (the protected evaluator, the judge's
# side) never touches a campaign's store.
NARROW = {("evaluator", "store"): ("evaluator/remote/",)}
INCLUDE = re.compile(r'\s*#\s*include\s+"([^/"]+)/')
SOURCE = (".cpp", ".hpp", ".h", ".cc")


def arrows(root):
    """(from module, to module) -> [file:line, ...] for every include of another module."""
    found = collections.defaultdict(list)
    for module in FLOOR:
        for folder, _, files in os.walk(os.path.join(root, module)):
            for name in sorted(files):
                if not name.endswith(SOURCE):
                    continue
                path = os.path.join(folder, name)
                with open(path, errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if m and m.group(1) in FLOOR and m.group(1) != module:
                            found[(module, m.group(1))].append(
                                f"{os.path.relpath(path, root)}:{number}")
    return found


def upward(found):
    """The arrows that do not point to a lower floor, and those from a room
    NARROW does not allow."""
    bad = {a: where for a, where in found.items() if FLOOR[a[1]] >= FLOOR[a[0]]}
    for arrow, rooms in NARROW.items():
        outside = [w for w in found.get(arrow, []) if not w.startswith(rooms)]
        if outside:
            bad[arrow] = outside
    return bad


def main():
    root = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    found = arrows(root)
    bad = upward(found)
    if "--quiet" not in sys.argv:
        for (a, b), where in sorted(found.items(), key=lambda kv: (-FLOOR[kv[0][0]], kv[0])):
            print(f"{a} (floor {FLOOR[a]}) -> {b} (floor {FLOOR[b]}): {len(where)} include(s)")
    for (a, b), where in sorted(bad.items()):
        word = "UP" if FLOOR[b] >= FLOOR[a] else "OUTSIDE " + "|".join(NARROW[(a, b)])
        print(f"{word}: {a} (floor {FLOOR[a]}) includes {b} (floor {FLOOR[b]}): " + ", ".join(where[:5]))
    print(f"{len(found)} arrows between {len(FLOOR)} modules, {len(bad)} not pointing down")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
