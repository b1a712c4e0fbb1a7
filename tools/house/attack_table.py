"""The attack classes' table of docs/rules.md, written from its one list,
tests/evaluator/corpus/attack_classes.json (each public reward-hack class,
its source, the corpus entries that attack korch with it, what stops it).

  python3 tools/house/attack_table.py            # prints the table
  python3 tools/house/attack_table.py --check    # exit 1 unless docs/rules.md holds it
                                                 # and every hack file is in one class
"""
import glob
import json
import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
CORPUS = os.path.join(ROOT, "tests", "evaluator", "corpus")


def load():
    return json.load(open(os.path.join(CORPUS, "attack_classes.json"), encoding="utf-8"))


def table(classes):
    lines = ["| class | public source | entries | what stops it |", "|---|---|---|---|"]
    for c in classes:
        entries = ", ".join("`%s`" % e[len("hacks/"):] if e.startswith("hacks/") else "`%s`" % e
                            for e in c["entries"])
        if c.get("note"):
            entries += " (%s)" % c["note"]
        lines.append("| %s | %s | %s | %s |" % (c["class"], c["source"], entries, c["stops"]))
    return "\n".join(lines) + "\n"


def check(classes):
    problems = []
    files = {os.path.relpath(f, CORPUS)[:-3] for f in
             glob.glob(os.path.join(CORPUS, "hacks", "*.py")) + glob.glob(os.path.join(CORPUS, "gpu", "hacks", "*.py"))}
    listed = {}
    for c in classes:
        for e in c["entries"]:
            if e in listed:
                problems.append("%s is in two classes: %s and %s" % (e, listed[e], c["class"]))
            listed[e] = c["class"]
    problems += ["%s: a hack entry in no class (add it to attack_classes.json)" % f
                 for f in sorted(files - set(listed))]
    problems += ["%s: listed in class '%s' but no such file" % (e, listed[e])
                 for e in sorted(set(listed) - files)]
    rules = open(os.path.join(ROOT, "docs", "rules.md"), encoding="utf-8").read()
    if table(classes) not in rules:
        problems.append("docs/rules.md does not hold the table of attack_classes.json "
                        "(python3 tools/house/attack_table.py prints it)")
    for p in problems:
        print("attack_table: " + p)
    print("attack_table: %d classes, %d entries, %d problems" % (len(classes), len(listed), len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    classes = load()
    if "--check" in sys.argv[1:]:
        sys.exit(check(classes))
    sys.stdout.write(table(classes))
