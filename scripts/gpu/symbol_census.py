"""Which undefined symbols the cached native builds import, and where from.

  python3 scripts/gpu/symbol_census.py /var/tmp/korch-cache [--names exit,abort]

For every compile cache entry (<cache>/cache/<key>/ with a korch-manifest.json)
it reads the undefined symbols of each object file the way the symbol check
does (korch_rules.undefined_symbols_of_objects), runs the current allowlist
over them, and prints:
  - every symbol the allowlist refuses, with the objects that import it;
  - for each name in --names, the objects that import it (to find where a
    symbol such as `exit` comes from: the candidate's .cu, its .cpp, or the
    load_inline glue in main.cpp).
Trusted code only: it reads object files, it loads nothing.
"""
import argparse
import collections
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "evaluator", "rules"))

import korch_rules  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cache")
    ap.add_argument("--names", default="exit,_exit,_Exit,quick_exit")
    a = ap.parse_args()
    names = [n for n in a.names.split(",") if n]
    refused = collections.defaultdict(set)
    wanted = collections.defaultdict(set)
    entries = 0
    root = os.path.join(a.cache, "cache")
    for key in sorted(os.listdir(root)) if os.path.isdir(root) else []:
        d = os.path.join(root, key)
        man = os.path.join(d, "korch-manifest.json")
        if not os.path.exists(man):
            continue
        entries += 1
        module = json.load(open(man)).get("module", key[:12])
        for f in sorted(os.listdir(d)):
            if not f.endswith(".o"):
                continue
            syms = korch_rules.undefined_symbols_of_objects([os.path.join(d, f)])
            where = "%s/%s" % (module, f)
            for v in korch_rules.check_symbols(syms):
                refused[v["message"]].add(where)
            for s in syms:
                if s.split("@")[0] in names:
                    wanted[s].add(where)
    print("census: %d cache entries" % entries)
    for msg, objs in sorted(refused.items()):
        print("REFUSED %s: %s" % (msg, ", ".join(sorted(objs))))
    for s, objs in sorted(wanted.items()):
        print("IMPORTS %s: %s" % (s, ", ".join(sorted(objs))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
