#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes dlsync's one-file distribution: dlsync.h + dlsync.c (the library) and
dlsync_sim.h + dlsync_sim.c (the simulated device), with LICENSE, from the sources.

    python3 scripts/amalgamate.py [--out DIR]       (default: build/amalgamation)
    python3 scripts/amalgamate.py --list-sources {core,sim}
    python3 scripts/amalgamate.py --check-sources {core,sim} DIR 'a.c;b.c'

The output depends on nothing but the sources: the same tree gives the same bytes.

dlsync.c is the library's source files in the order sync/CMakeLists.txt lists them, each
private header inlined once, after dlsync.h. It defines DL_SYNC_BUILDING_LIBRARY itself, and puts
everything it defines under hidden visibility, so that the object it compiles to, linked
into any library or program, exports nothing but the versioned tensor-event deleters
(DL_SYNC_RECOGNIZED_API), as the static archive does (docs/vendoring.md). Define
DL_SYNC_BUILDING_SHARED when compiling it into a shared library that should export the
API. dlsync_sim.c is the same for sync/sim/ over dlsync_sim.h, which includes dlsync.h.
"""
import argparse
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INCLUDE = os.path.join(ROOT, "include")
FEATURE_MACROS = ("_GNU_SOURCE", "_POSIX_C_SOURCE", "_XOPEN_SOURCE", "_DEFAULT_SOURCE")
FEATURE_RE = re.compile(r"^\s*#\s*define\s+(%s)\b\s*(.*?)\s*(/\*.*)?$" % "|".join(FEATURE_MACROS))
LOCAL_INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SYSTEM_INCLUDE_RE = re.compile(r"^\s*#\s*include\s+<([^>]+)>")
SPDX_RE = re.compile(r"^\s*(/\*|//|#)?\s*SPDX-License-Identifier:.*$")


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def rel(path):
    return os.path.relpath(path, ROOT).replace(os.sep, "/")


def cmake_sources(cmake_file, variable):
    """The files a CMakeLists.txt puts in variable with set() and list(APPEND), in order."""
    text = re.sub(r"#[^\n]*", "", read(cmake_file))
    sources = []
    for match in re.finditer(r"\b(set|list)\s*\(([^)]*)\)", text):
        words = match.group(2).split()
        if match.group(1) == "set" and words[:1] == [variable]:
            sources = words[1:]
        elif match.group(1) == "list" and words[:2] == ["APPEND", variable]:
            sources += words[2:]
    base = os.path.dirname(cmake_file)
    return [os.path.join(base, s) for s in sources if s.endswith(".c")]


def core_sources():
    return cmake_sources(os.path.join(ROOT, "sync", "CMakeLists.txt"), "DL_SYNC_SOURCES")


def sim_sources():
    return cmake_sources(os.path.join(ROOT, "sync", "sim", "CMakeLists.txt"),
                         "DL_SYNC_SIM_SOURCES")


def version():
    text = read(os.path.join(INCLUDE, "dlsync", "version.h"))
    return ".".join(re.search(r"DL_SYNC_VERSION_%s (\d+)" % part, text).group(1)
                    for part in ("MAJOR", "MINOR", "PATCH"))


KEYWORDS = set("""auto break case char const continue default do double else enum extern float
for goto if inline int long register restrict return short signed sizeof static struct switch
typedef union unsigned void volatile while _Alignas _Alignof _Atomic _Bool _Complex _Generic
_Noreturn _Static_assert _Thread_local __attribute__ __thread""".split())
TOKEN_RE = re.compile(r"""
    (?P<skip>/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')
  | (?P<directive>^[ \t]*\#(?:\\\n|[^\n])*)
  | (?P<ident>[A-Za-z_]\w*)
  | (?P<arrow>->)
  | (?P<punct>[^\sA-Za-z_])
""", re.S | re.M | re.X)
DEFINE_RE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)", re.M)


def file_scope_names(text, every_declaration=False):
    """Names a source file defines for itself at file scope: static functions and
    variables, typedefs, struct, union and enum tags, enum constants; with
    every_declaration, every name declared at file scope (what a header declares)."""
    names = set()
    depth = paren = 0
    statement = []  # (token, paren depth) at brace depth 0 since the last ; or body
    in_enum = False
    previous = None
    for m in TOKEN_RE.finditer(text):
        if m.group("skip") or m.group("directive"):
            continue
        token = m.group()
        if in_enum and depth == 1 and m.group("ident") and previous in ("{", ","):
            names.add(token)
        if token == "{":
            if depth == 0:
                words = [t for t, _ in statement]
                if len(words) >= 2 and words[-2] in ("struct", "union", "enum"):
                    names.add(words[-1])
                in_enum = bool(words) and (words[-1] == "enum" or
                                           (len(words) >= 2 and words[-2] == "enum"))
                statement.append(("{}", paren))
            depth += 1
        elif token == "}":
            depth -= 1
            if depth == 0:
                in_enum = False
                words = [t for t, _ in statement]
                if "(" in words and "=" not in words and "typedef" not in words:
                    names |= declared(statement[:-1], every_declaration)  # a function body
                    statement = []
        elif depth == 0:
            if token == "(":
                paren += 1
            elif token == ")":
                paren -= 1
            if token == ";" and paren == 0:
                names |= declared(statement, every_declaration)
                statement = []
            else:
                statement.append((token, paren if token != "(" else paren))
        previous = token
    return names


def declared(statement, every_declaration=False):
    """The names a file-scope declaration with static or typedef declares (with
    every_declaration: any file-scope declaration)."""
    tokens = [t for t, _ in statement]
    if not every_declaration and "static" not in tokens and "typedef" not in tokens:
        return set()
    names = set()
    declarator = []
    for token, paren in statement + [(",", 0)]:
        if token in (",", "=") and paren == 0:
            if declarator is not None:
                name = declarator_name(declarator)
                if name:
                    names.add(name)
            declarator = [] if token == "," else None  # None: skip the initializer
        elif declarator is not None:
            declarator.append((token, paren))
    return names


def declarator_name(tokens):
    idents = [(i, t) for i, (t, _) in enumerate(tokens) if re.match(r"[A-Za-z_]", t)
              and t not in KEYWORDS]
    if not idents:
        return None
    # a function or a function type: the name before the first ( at depth 0, or ( * name )
    for i, (t, p) in enumerate(tokens):
        if t == "(" and p == 1:
            if i > 0 and re.match(r"[A-Za-z_]", tokens[i - 1][0]) and tokens[i - 1][0] not in KEYWORDS \
                    and tokens[i - 1][0] != "__attribute__":
                # skip __attribute__((...)) and similar: the name is followed by its parameters
                return tokens[i - 1][0]
            if i + 2 < len(tokens) and tokens[i + 1][0] == "*" and re.match(r"[A-Za-z_]", tokens[i + 2][0]):
                return tokens[i + 2][0]
            break
    # an object: the last identifier before its array bounds
    names = [t for t, p in tokens if p == 0 and re.match(r"[A-Za-z_]", t) and t not in KEYWORDS]
    cut = [t for t, p in tokens]
    if "[" in cut:
        before = tokens[:cut.index("[")]
        names = [t for t, p in before if p == 0 and re.match(r"[A-Za-z_]", t) and t not in KEYWORDS]
    return names[-1] if names else None


def rename(text, names, suffix):
    """Renames the identifiers in names, except member names: accesses (.name, ->name)
    and the members a struct or union body declares."""
    tokens = [m for m in TOKEN_RE.finditer(text) if not m.group("skip")]
    out = []
    last = 0
    braces = []  # for each open brace: whether it is a struct or union body
    for i, m in enumerate(tokens):
        token = m.group()
        if m.group("directive"):
            hash_at = token.index("#") + 1
            out.append(text[last:m.start()] + token[:hash_at] + rename(token[hash_at:], names, suffix))
            last = m.end()
            continue
        if token == "{":
            back = [t.group() for t in tokens[max(0, i - 2):i]]
            braces.append(bool(set(back) & {"struct", "union"}))
        elif token == "}" and braces:
            braces.pop()
        if not (m.group("ident") and token in names):
            continue
        previous = tokens[i - 1].group() if i > 0 else None
        following = tokens[i + 1].group() if i + 1 < len(tokens) else None
        if previous in (".", "->"):
            continue
        if braces and braces[-1] and following in (";", ",", "[", ":", ")"):
            continue  # a member's name
        out.append(text[last:m.start()] + token + "__" + suffix)
        last = m.end()
    out.append(text[last:])
    return "".join(out)


def resolve(name, including_dir):
    for base in (including_dir, INCLUDE):
        path = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(path):
            return path
    return None


def is_public(path):
    return path.startswith(os.path.join(INCLUDE, "dlsync") + os.sep)


class Writer:
    """Inlines files: every local header once, public headers only where allowed."""

    def __init__(self, inline_public, public_replacement=None, wrap_system=False):
        self.inline_public = inline_public  # predicate on a public header's path
        self.public_replacement = public_replacement  # emitted once for the others
        self.wrap_system = wrap_system
        self.seen = set()
        self.replaced = False
        self.features = {}
        self.out = []

    def file(self, path, text=None, after=""):
        if path in self.seen:
            return
        self.seen.add(path)
        self.out.append("/* ---- %s ---- */\n" % rel(path))
        for line in (read(path) if text is None else text).splitlines():
            self.line(line, path)
        self.out.append(after)
        self.out.append("/* ---- end of %s ---- */\n" % rel(path))

    def sources(self, paths):
        """Source files one after the other, as separate translation units would see
        them: a name a file defines for itself that another file uses too gets the file's
        suffix, and the macros a file defines end with it."""
        texts = {path: read(path) for path in paths}
        tokens = {path: {m.group() for m in TOKEN_RE.finditer(text) if m.group("ident")}
                  for path, text in texts.items()}
        # Names a header declares are the same entity in every file (a struct a header
        # declares and one file completes, say): never renamed.
        in_headers = set()
        for folder in (os.path.join(ROOT, "sync"), INCLUDE):
            for base, _, files in os.walk(folder):
                for name in sorted(files):
                    if name.endswith(".h"):
                        text = read(os.path.join(base, name))
                        in_headers |= file_scope_names(text, every_declaration=True)
                        in_headers.update(DEFINE_RE.findall(text))
        header_macros = set()
        for path in paths:
            text = texts[path]
            # What this file defines for itself and another file names too (its own
            # definition or a local variable that would shadow it).
            mine = {name for name in file_scope_names(text) - in_headers
                    if any(name in tokens[other] for other in paths if other != path)}
            if mine:
                suffix = re.sub(r"\W", "_", os.path.splitext(os.path.relpath(path, os.path.join(ROOT, "sync")))[0])
                text = rename(text, mine, suffix)
            before = set(self.seen)
            macros = [m for m in DEFINE_RE.findall(text) if m not in FEATURE_MACROS]
            self.file(path, text, "")
            for header in set(self.seen) - before - {path}:
                header_macros.update(DEFINE_RE.findall(read(header)))
            ends = sorted(set(macros) - header_macros)
            if ends:
                self.out.insert(len(self.out) - 1, "".join("#undef %s\n" % m for m in ends))

    def line(self, line, path):
        if SPDX_RE.match(line):
            return  # the distribution's own licence line is at the top
        feature = FEATURE_RE.match(line)
        if feature:
            self.features.setdefault(feature.group(1), feature.group(2))
            self.out.append("/* %s: defined at the top of this file */\n" % feature.group(1))
            return
        local = LOCAL_INCLUDE_RE.match(line)
        if local:
            target = resolve(local.group(1), os.path.dirname(path))
            if target is None:
                raise SystemExit("%s: cannot find %s" % (rel(path), local.group(1)))
            if is_public(target) and not self.inline_public(target):
                if not self.replaced and self.public_replacement:
                    self.out.append(self.public_replacement + "\n")
                self.replaced = True
                return
            self.file(target)
            return
        if self.wrap_system and SYSTEM_INCLUDE_RE.match(line):
            # The C library's declarations get no visibility from the region.
            self.out.append("DL_SYNC__SYSTEM_HEADERS_BEGIN\n%s\nDL_SYNC__SYSTEM_HEADERS_END\n" % line)
            return
        self.out.append(line + "\n")

    def text(self):
        return "".join(self.out)


def banner(name, what):
    return """\
/* SPDX-License-Identifier: Apache-2.0 */
/*
 * %s: %s, dlsync %s, one-file distribution.
 *
 * Generated by scripts/amalgamate.py from the dlsync sources; do not edit. Licensed
 * under the Apache License, Version 2.0: see the LICENSE file that comes with it.
 */
""" % (name, what, version())


def header(name, what, guard, body):
    return "%s#ifndef %s\n#define %s\n\n%s\n#endif /* %s */\n" % (
        banner(name, what), guard, guard, body, guard)


def source(name, what, header_name, writer, sources):
    writer.sources(sources)
    body = writer.text()
    features = "".join("#ifndef %s\n#define %s%s\n#endif\n" % (m, m, (" " + v) if v else "")
                       for m, v in sorted(writer.features.items()))
    return """%s
/* Feature macros the sources need, before any system header. */
%s
/* Compiled as dlsync's own build: a copy that exports nothing but the versioned
   tensor-event deleters, unless DL_SYNC_BUILDING_SHARED is defined (dlsync/version.h). */
#ifndef DL_SYNC_BUILDING_LIBRARY
#define DL_SYNC_BUILDING_LIBRARY 1
#endif

#include "%s"

/* Everything below is hidden unless it says otherwise (DL_SYNC_API,
   DL_SYNC_RECOGNIZED_API); the C library's headers are read outside that region. */
#if defined(__GNUC__) && !defined(_WIN32)
#define DL_SYNC__SYSTEM_HEADERS_BEGIN _Pragma("GCC visibility pop")
#define DL_SYNC__SYSTEM_HEADERS_END _Pragma("GCC visibility push(hidden)")
_Pragma("GCC visibility push(hidden)")
#else
#define DL_SYNC__SYSTEM_HEADERS_BEGIN
#define DL_SYNC__SYSTEM_HEADERS_END
#endif

%s
#if defined(__GNUC__) && !defined(_WIN32)
_Pragma("GCC visibility pop")
#endif
""" % (banner(name, what), features, header_name, body)


def amalgamate():
    outputs = {}
    # dlsync.h: the umbrella header with every public header it includes, once.
    core_header = Writer(inline_public=lambda path: True)
    core_header.file(os.path.join(INCLUDE, "dlsync", "dlsync.h"))
    if core_header.features:
        raise SystemExit("a public header defines a feature macro")
    outputs["dlsync.h"] = header("dlsync.h", "the dlsync library's API", "DL_SYNC_AMALGAMATION_H_",
                                 core_header.text())
    core_public = set(core_header.seen)

    # dlsync_sim.h: dlsync/sim.h and what it includes beyond dlsync.h.
    sim_header = Writer(inline_public=lambda path: path not in core_public,
                        public_replacement='#include "dlsync.h"')
    sim_header.file(os.path.join(INCLUDE, "dlsync", "sim.h"))
    outputs["dlsync_sim.h"] = header("dlsync_sim.h", "the simulated device's API",
                                     "DL_SYNC_AMALGAMATION_SIM_H_", sim_header.text())

    outputs["dlsync.c"] = source("dlsync.c", "the dlsync library", "dlsync.h",
                                 Writer(inline_public=lambda path: False, wrap_system=True),
                                 core_sources())
    outputs["dlsync_sim.c"] = source(
        "dlsync_sim.c", "the simulated device (link it with dlsync.c)", "dlsync_sim.h",
        Writer(inline_public=lambda path: False, wrap_system=True), sim_sources())
    outputs["LICENSE"] = read(os.path.join(ROOT, "LICENSE"))
    return outputs


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=os.path.join(ROOT, "build", "amalgamation"))
    parser.add_argument("--version", action="store_true", help="print dlsync's version")
    parser.add_argument("--list-sources", choices=("core", "sim"),
                        help="print the source files of the library or the simulator")
    parser.add_argument("--check-sources", nargs=3, metavar=("KIND", "DIR", "FILES"),
                        help="fail unless FILES (;-separated, relative to DIR) are the source "
                             "files this script reads for KIND (core or sim)")
    args = parser.parse_args()
    if args.version:
        print(version())
        return 0
    if args.list_sources:
        for path in core_sources() if args.list_sources == "core" else sim_sources():
            print(rel(path))
        return 0
    if args.check_sources:
        kind, folder, files = args.check_sources
        given = sorted(os.path.normpath(os.path.join(folder, p)) for p in files.split(";")
                       if p.endswith(".c"))
        parsed = sorted(os.path.normpath(p) for p in
                        (core_sources() if kind == "core" else sim_sources()))
        if given != parsed:
            print("%s sources differ: the build compiles %s, the one-file distribution reads %s"
                  % (kind, [rel(p) for p in given], [rel(p) for p in parsed]), file=sys.stderr)
            return 1
        print("%s: %d source files, as the build compiles them" % (kind, len(parsed)))
        return 0
    os.makedirs(args.out, exist_ok=True)
    for name, text in amalgamate().items():
        with open(os.path.join(args.out, name), "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
