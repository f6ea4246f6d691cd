#!/usr/bin/env python3
"""Prints the engine's module import graph (`use crate::m` and `crate::m::` paths in code, per
top-level module of engine/src/, doc comments and tests left out) and every import circle (strongly
connected component). Exits 1 if any circle exists."""
import os, re, sys

root = os.path.join(os.path.dirname(__file__), "..", "engine", "src")
mods = {}
for dirpath, _, files in os.walk(root):
    for f in files:
        if not f.endswith(".rs"):
            continue
        rel = os.path.relpath(os.path.join(dirpath, f), root)
        top = rel.split(os.sep)[0].removesuffix(".rs")
        if top in ("lib", "inbox_tests"):
            continue
        text = open(os.path.join(dirpath, f)).read()
        text = text.split("#[cfg(test)]\nmod tests")[0]
        code = "\n".join(l for l in text.split("\n") if not l.lstrip().startswith("//"))
        deps = set(re.findall(r"\bcrate::(\w+)", code)) | set(
            m for grp in re.findall(r"use crate::\{([^}]*)\}", code) for m in re.findall(r"\b(\w+)::", grp))
        mods.setdefault(top, set()).update(d for d in deps if d != top)
for m in sorted(mods):
    print(f"{m:10} -> {' '.join(sorted(d for d in mods[m] if d in mods))}")
# Tarjan's strongly connected components.
index, low, stack, on, sccs, n = {}, {}, [], set(), [], [0]
def visit(v):
    index[v] = low[v] = n[0]; n[0] += 1; stack.append(v); on.add(v)
    for w in mods.get(v, ()):
        if w not in mods:
            continue
        if w not in index:
            visit(w); low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        c = set()
        while True:
            w = stack.pop(); on.discard(w); c.add(w)
            if w == v:
                break
        if len(c) > 1:
            sccs.append(c)
sys.setrecursionlimit(10000)
for v in sorted(mods):
    if v not in index:
        visit(v)
bad = sccs
for c in sccs:
    print("IMPORT CIRCLE: " + " ".join(sorted(c)))
print("no import circle" if not bad else f"{len(bad)} import circle(s)")
sys.exit(1 if bad else 0)
