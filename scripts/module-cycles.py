#!/usr/bin/env python3
"""Checks the engine's module imports (engine/src) and exits 1 if any check fails:

1. No import circle. Prints the import graph, one node per top-level module (a folder `a/` is one
   node: the union of its files' imports), and every circle (strongly connected component). No
   circle is allowed.
2. Each module imports only what its module doc says it may. Every file's module doc (its leading
   `//!` lines) ends with one sentence "May import `a`, `b` and `c`." (it begins with "May import"
   and runs to the next full stop; the last such sentence counts). Allowed are the backticked
   names in it (a path counts by its first segment, `crate::` left out: `deliver::Links` allows
   `deliver`) and, if it says "the leaves", every module in LEAVES below; nothing else (a sentence
   such as "every module but `x`" allows only `x`). A file without the sentence may import nothing
   (a leaf that imports nothing may say "May import nothing."). Every other `crate::x` import is
   reported, one line per file, naming the file, its module, the imports and the sentence.
3. The leaves (LEAVES) import only leaves, so that "the leaves" stays a set of modules below
   everything else.
4. No circle between the files of one folder: a file that names a sibling file's module
   (`super::b::..`, `use super::{b, ..}`, or `crate::a::b::..` from inside `a/`) imports it, and
   no such imports may loop. (A name taken through the folder's `mod.rs` re-exports,
   `super::Thing`, is not seen, as the crate root's re-exports are not.)

Rules:
- A file's module: `a.rs` and `a/mod.rs` are `a`; `a/b.rs` and `a/b/mod.rs` are `a::b`. `lib.rs`
  (the crate root: it declares and re-exports every module) and the test files in TEST_FILES (a
  folder's `tests.rs`, its `#[cfg(test)] mod tests;`) are not checked.
- Imports are the `crate::x` paths in code: `use crate::x::..`, each item of `use crate::{x::.., y}`,
  and `crate::x::..` in expressions and types. Only the first segment counts, and only names of
  modules: a path through the crate root's re-exports (`crate::Scope`) is not seen. Comment lines (`//`,
  `//!`, `///`) are left out, and so is everything from a `#[cfg(test)] mod tests` to the end of the
  file (test modules sit at the end).
- Folders: a file may always import its own top-level module (`crate::a::..` from any file under
  `a/`: its folder's siblings and parent). Otherwise each file answers for itself: a file in a
  folder is checked against its own module doc, not its folder's `mod.rs`; only the circle check
  counts the folder as one module.

`--self-test` runs the checks on small fixture trees (written to a temporary folder) and fails
unless a clean tree passes and a tree with a forbidden import (plain or in a `use crate::{..}`
group), one that imports without the sentence, one with a leaf importing a non-leaf, one with
a circle and one with a circle between the files of a folder each fail with the message that names the file and module.
`--root DIR` checks another source tree."""
import os
import re
import sys
import tempfile

# The leaf modules: "the leaves" in a module doc's sentence means these.
LEAVES = ["config", "error", "event", "hash", "id", "state", "sync", "time"]
# File names of test modules: a folder's `tests.rs` is its `#[cfg(test)] mod tests;`.
TEST_FILES = {"tests.rs"}

SENTENCE = re.compile(r"May import\b(.*?)\.(?=\s|$)", re.S)


def module_of(rel):
    """`a/b.rs` -> `a::b`; `a/mod.rs` -> `a`."""
    parts = rel.split(os.sep)
    parts[-1] = parts[-1].removesuffix(".rs")
    if parts[-1] == "mod":
        parts.pop()
    return "::".join(parts)


def module_doc(text):
    lines = []
    for line in text.split("\n"):
        s = line.strip()
        if s.startswith("//!"):
            lines.append(s[3:].strip())
        elif s and not s.startswith("#!"):
            break
    return " ".join(lines)


def allowed_by(doc):
    """The modules the doc's "May import" sentence allows, or None if it has none."""
    found = list(SENTENCE.finditer(doc))
    if not found:
        return None
    m = found[-1]  # the last such sentence: the one the doc ends with
    sentence = m.group(0)
    names = {n.removeprefix("crate::").split("::")[0].strip() for n in re.findall(r"`([^`]+)`", sentence)}
    if "the leaves" in sentence:
        names |= set(LEAVES)
    return names, " ".join(sentence.split())


def group_items(body):
    """The first segment of each top-level item of a `use crate::{..}` group."""
    items, depth, cur = [], 0, ""
    for ch in body:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        if ch == "," and depth == 0:
            items.append(cur)
            cur = ""
        else:
            cur += ch
    items.append(cur)
    return {m.group(1) for m in (re.match(r"\s*(\w+)", i) for i in items) if m}


def code_of(text):
    """A file's code: up to its `#[cfg(test)] mod tests`, without comment lines."""
    text = re.split(r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*mod tests\b", text)[0]
    return "\n".join(l for l in text.split("\n") if not l.lstrip().startswith("//"))


def named_after(code, prefix):
    """The first segments of the paths that follow `prefix` (a path such as `crate::` or
    `super::`, regex-escaped): `prefix x::..` and each item of `prefix {x::.., y}`."""
    names = set(re.findall(r"(?<![\w$])" + prefix + r"(\w+)", code))
    for start in [m.end() for m in re.finditer(r"(?<![\w$])" + prefix + r"\{", code)]:
        depth, i = 1, start
        while i < len(code) and depth:
            depth += {"{": 1, "}": -1}.get(code[i], 0)
            i += 1
        names |= group_items(code[start:i - 1])
    names.discard("")
    return names


def imports_of(text):
    return named_after(code_of(text), r"crate::")


def sibling_imports(text, folder, siblings):
    """The sibling files of `folder` (a `::` path) that a file's code names."""
    code = code_of(text)
    names = named_after(code, r"super::") | named_after(code, r"crate::" + re.escape(folder) + r"::")
    return names & siblings


def check(root, out=print):
    """Runs the checks on the tree at `root`; returns the number of failures."""
    files = {}
    for dirpath, _, names in os.walk(root):
        for f in sorted(names):
            if not f.endswith(".rs") or f in TEST_FILES:
                continue
            rel = os.path.relpath(os.path.join(dirpath, f), root)
            if rel == "lib.rs":
                continue
            files[rel] = open(os.path.join(dirpath, f)).read()
    tops = {module_of(rel).split("::")[0] for rel in files}
    graph, failures = {}, []
    for rel in sorted(files):
        text, module = files[rel], module_of(rel)
        top = module.split("::")[0]
        deps = {d for d in imports_of(text) if d in tops and d != top}
        graph.setdefault(top, set()).update(deps)
        path = os.path.join("engine", "src", rel) if root == DEFAULT_ROOT else rel
        rule = allowed_by(module_doc(text))
        allowed, sentence = rule if rule else (set(), None)
        forbidden = sorted(deps - allowed)
        if forbidden:
            said = f'its module doc says "{sentence}"' if sentence else \
                'its module doc has no sentence "May import ..." (so it may import nothing)'
            failures.append(f"FORBIDDEN IMPORT: {path} (module {module}) imports "
                            f"{', '.join('crate::' + d for d in forbidden)}; {said}")
        if module in LEAVES and deps - set(LEAVES):
            failures.append(f"LEAF IMPORTS A NON-LEAF: {path} (module {module}) is one of the leaves "
                            f"({', '.join(LEAVES)}) but imports "
                            f"{', '.join('crate::' + d for d in sorted(deps - set(LEAVES)))}")
    for m in sorted(graph):
        out(f"{m:11} -> {' '.join(sorted(graph[m]))}")
    for c in circles(graph):
        failures.append("IMPORT CIRCLE: " + " ".join(sorted(c)))
    folders = {}
    for rel in files:
        parts = module_of(rel).split("::")
        if len(parts) > 1 and not rel.endswith("mod.rs"):
            folders.setdefault("::".join(parts[:-1]), {})[parts[-1]] = rel
    for folder, members in sorted(folders.items()):
        inner = {name: sibling_imports(files[rel], folder, set(members) - {name})
                 for name, rel in members.items()}
        for c in circles(inner):
            failures.append(f"IMPORT CIRCLE IN {folder.replace('::', '/')}/: " + " ".join(sorted(c)))
    for f in failures:
        out(f)
    out(f"{len(failures)} failure(s)" if failures else
        "no import circle; every module imports only what its module doc allows")
    return len(failures)


def circles(graph):
    """Tarjan's strongly connected components of more than one module."""
    index, low, stack, on, sccs, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            c = set()
            while True:
                w = stack.pop()
                on.discard(w)
                c.add(w)
                if w == v:
                    break
            if len(c) > 1:
                sccs.append(c)

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sccs


def self_test():
    """Fixture trees that must pass or fail, each with the message that must name the fault."""
    clean = {
        "lib.rs": "mod a; mod b; mod leafy;\n",
        "sync.rs": "//! A leaf.\n//!\n//! May import nothing.\n",
        "leafy.rs": "//! A leaf without the sentence, importing nothing.\n",
        "a.rs": "//! Top.\n//!\n//! May import the leaves and `b` (its\n//! `b::Thing`).\nuse crate::b::Thing;\nuse crate::{sync, b::Other};\n",
        "b/mod.rs": "//! A folder.\n//!\n//! May import the leaves.\nmod c;\nuse crate::sync::Arc;\nuse crate::b::c::X;\n",
        "b/c.rs": "//! In the folder.\n//!\n//! May import `sync`.\nuse crate::b::Y;\nfn f() { crate::sync::go(); }\n"
                  "#[cfg(test)]\nmod tests {\n    use crate::a::Z;\n}\n",
    }
    cases = [
        ("a clean tree", {}, None),
        ("a forbidden import", {"b/c.rs": "//! In the folder.\n//!\n//! May import `sync`.\nuse crate::a::Z;\n"},
         "FORBIDDEN IMPORT: b/c.rs (module b::c) imports crate::a"),
        ("a forbidden import in a group", {"b/mod.rs": "//! F.\n//!\n//! May import the leaves.\nuse crate::{sync::Arc, a};\n"},
         "FORBIDDEN IMPORT: b/mod.rs (module b) imports crate::a"),
        ("no sentence", {"b/c.rs": "//! In the folder, with no rule.\nuse crate::sync::Arc;\n"},
         "FORBIDDEN IMPORT: b/c.rs (module b::c) imports crate::sync; its module doc has no sentence"),
        ("a leaf importing a non-leaf", {"sync.rs": "//! A leaf.\n//!\n//! May import `a`.\nuse crate::a::Z;\n"},
         "LEAF IMPORTS A NON-LEAF: sync.rs (module sync)"),
        ("a circle", {"b/c.rs": "//! In the folder.\n//!\n//! May import `a`.\nuse crate::a::Z;\n"},
         "IMPORT CIRCLE: a b"),
        ("a circle inside a folder",
         {"b/c.rs": "//! In the folder.\n//!\n//! May import `sync`.\nuse super::d::D;\n",
          "b/d.rs": "//! In the folder.\n//!\n//! May import `sync`.\nuse super::{c::C, Y};\n"},
         "IMPORT CIRCLE IN b/: c d"),
    ]
    bad = 0
    for name, change, expect in cases:
        with tempfile.TemporaryDirectory() as root:
            for rel, text in {**clean, **change}.items():
                os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
                open(os.path.join(root, rel), "w").write(text)
            lines = []
            failed = check(root, lines.append)
        ok = (failed == 0) if expect is None else (failed > 0 and any(l.startswith(expect) for l in lines))
        print(f"self-test: {name}: {'ok' if ok else 'WRONG'}")
        if not ok:
            bad += 1
            print("  expected " + ("a pass" if expect is None else repr(expect)) + ", got:")
            print("\n".join("    " + l for l in lines))
    print("self-test passed" if not bad else f"self-test: {bad} case(s) wrong")
    return bad


DEFAULT_ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "engine", "src"))

if __name__ == "__main__":
    if "--self-test" in sys.argv:
        sys.exit(1 if self_test() else 0)
    root = sys.argv[sys.argv.index("--root") + 1] if "--root" in sys.argv else DEFAULT_ROOT
    sys.exit(1 if check(os.path.normpath(root)) else 0)
