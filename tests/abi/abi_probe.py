#!/usr/bin/env python3
"""Generates the ABI probe for one set of DAT 2.0 headers.

  abi_probe.py --cc CC --include-dir DIR --label NAME --out-dir OUT

DIR is the directory that holds dat2/ (ours: <srcdir>/include, Debian's:
/usr/include).  Everything the probe checks is read from those headers as the
compiler sees them (CC -E, and CC -E -dM for macros), so a struct, field,
enumerator or macro that exists on one side only shows up as a line the other
side lacks.  Three files are written:

  OUT/probe-NAME.c  prints one "kind name value..." line per fact: sizeof and
                    alignment of every typedef and struct/union, offset/size/
                    type class of every member (nested ones too), value and
                    type of every enumerator and constant macro, the text of
                    every string macro, the expansion of every other macro,
                    the arity of every function-like macro, and the name of
                    every function.  Build it against the same DIR and run it.
  OUT/decls-NAME.c  re-declares every function and typedef of these headers
                    and asserts the type of every struct member.  Compile it
                    against the OTHER set of headers: C accepts the
                    redeclarations only if each type is the same.
  OUT/linkage-NAME.cc
                    the functions again, inside extern "C", for a C++
                    compiler: proves the headers give them C linkage.
"""
import argparse
import os
import re
import shlex
import subprocess
import sys

TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<str>"(?:\\.|[^"\\])*")
  | (?P<chr>'(?:\\.|[^'\\])*')
  | (?P<num>\.?[0-9](?:[eEpP][+-]|[A-Za-z0-9_.])*)
  | (?P<id>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<punct>\.\.\.|->|<<=|>>=|<<|>>|<=|>=|==|!=|&&|\|\||\+\+|--|\#\#|[-+*/%&|^!~<>=?:;,.(){}\[\]\#@])
""", re.X)

OPEN, CLOSE = "([{", ")]}"
TYPE_KEYWORDS = {"void", "char", "short", "int", "long", "unsigned", "signed", "float",
                 "double", "_Bool", "const", "volatile", "struct", "union", "enum"}
EXPR_KEYWORDS = TYPE_KEYWORDS | {"sizeof"}



class Error(Exception):
    pass


def tokenize(text):
    tokens, pos = [], 0
    while pos < len(text):
        m = TOKEN.match(text, pos)
        if not m:
            raise Error(f"cannot tokenize: {text[pos:pos + 40]!r}")
        pos = m.end()
        if m.lastgroup != "ws":
            tokens.append((m.lastgroup, m.group()))
    return tokens


def text_of(tokens):
    return " ".join(t for _, t in tokens)


def split_top(tokens, sep):
    """Splits at sep tokens that are outside any bracket."""
    parts, cur, depth = [], [], 0
    for tok in tokens:
        if tok[1] in OPEN:
            depth += 1
        elif tok[1] in CLOSE:
            depth -= 1
        if depth == 0 and tok[1] == sep:
            parts.append(cur)
            cur = []
        else:
            cur.append(tok)
    if cur:
        parts.append(cur)
    return parts


def matching(tokens, i):
    """Index of the bracket closing the one at tokens[i]."""
    depth = 0
    for j in range(i, len(tokens)):
        if tokens[j][1] in OPEN:
            depth += 1
        elif tokens[j][1] in CLOSE:
            depth -= 1
            if depth == 0:
                return j
    raise Error("unbalanced brackets in: " + text_of(tokens[i:i + 20]))


def declarator_name(tokens):
    """(index, name) of the identifier a declaration declares."""
    depth = 0
    for i, (kind, tok) in enumerate(tokens):
        # "(*name)" or "(*name)(...)": a pointer to function or to array
        if tok == "(" and depth == 0 and i + 1 < len(tokens) and tokens[i + 1][1] == "*":
            end = matching(tokens, i)
            ids = [j for j in range(i, end) if tokens[j][0] == "id"]
            if ids:
                return ids[-1], tokens[ids[-1]][1]
        # "type name(params)": a function
        if tok == "(" and depth == 0 and i > 0 and tokens[i - 1][0] == "id" \
                and tokens[i - 1][1] not in ("__typeof__", "__attribute__", "typeof"):
            return i - 1, tokens[i - 1][1]
        if tok in OPEN:
            depth += 1
        elif tok in CLOSE:
            depth -= 1
    depth, found = 0, None
    for i, (kind, tok) in enumerate(tokens):
        if tok in OPEN:
            depth += 1
        elif tok in CLOSE:
            depth -= 1
        elif depth == 0 and kind == "id" and tok not in TYPE_KEYWORDS:
            found = (i, tok)
    if found is None:
        raise Error("no declarator in: " + text_of(tokens))
    return found


class Headers:
    """What one set of headers declares, as the compiler sees it."""

    def __init__(self, cc, include_dir):
        self.cc = cc
        self.include_dir = include_dir
        self.dat2 = os.path.realpath(os.path.join(include_dir, "dat2"))
        if not os.path.isdir(self.dat2):
            raise Error(f"{self.dat2} does not exist")
        self.files = sorted(f for f in os.listdir(self.dat2) if f.endswith(".h"))
        # Every header, in an order both sets accept: <netinet/in.h> first
        # (Debian's dat_ib_extensions.h needs struct sockaddr_in6 complete),
        # then udat.h (Debian's registry and extension headers need it).
        order = sorted(self.files, key=lambda f: f != "udat.h")
        self.umbrella = "#include <netinet/in.h>\n" + "".join(
            f"#include <dat2/{f}>\n" for f in order)
        self.typedefs = []      # (name, redeclaration text or None)
        self.aggregates = []    # (type expression, [(member path, type text or None)])
        self.enumerators = []
        self.functions = []     # (name, declaration text, is static)
        self.tags = set()
        self._parse(self._dat2_text(self._cpp(self.umbrella)))
        self.macros = self._macros()

    def _cpp(self, source, *flags):
        cmd = self.cc + ["-E", "-std=gnu11", *flags, "-I", self.include_dir, "-x", "c", "-"]
        r = subprocess.run(cmd, input=source, capture_output=True, text=True)
        if r.returncode != 0:
            raise Error(f"{shlex.join(cmd)} failed:\n{r.stderr}")
        return r.stdout

    def _dat2_text(self, preprocessed):
        """Keeps the lines that come from DIR/dat2/*.h."""
        keep, mine = [], False
        for line in preprocessed.splitlines():
            m = re.match(r'# \d+ "([^"]*)"', line)
            if m:
                mine = os.path.dirname(os.path.realpath(m.group(1))) == self.dat2
            elif mine:
                keep.append(line)
        return "\n".join(keep)

    # ---- declarations -------------------------------------------------

    def _parse(self, text):
        tokens, decl, i = tokenize(text), [], 0
        while i < len(tokens):
            tok = tokens[i][1]
            if tok in "([{":
                end = matching(tokens, i)
                if tok == "{" and decl and decl[-1][1] == ")":      # function body
                    self._function(decl, static=True)
                    decl, i = [], end + 1
                    continue
                decl.extend(tokens[i:end + 1])
                i = end + 1
                continue
            if tok == ";":
                self._declaration(decl)
                decl = []
            else:
                decl.append(tokens[i])
            i += 1

    def _declaration(self, decl):
        if not decl:
            return
        if decl[0][1] == "typedef":
            self._typedef(decl[1:])
        elif decl[0][1] in ("struct", "union", "enum") and len(decl) == 2:
            self.tags.add(decl[1][1])           # a forward declaration
        elif decl[0][1] in ("struct", "union", "enum") and any(t == "{" for _, t in decl):
            kind, tag, body, _ = self._aggregate(decl)
            if kind != "enum":
                self.aggregates.append((f"{kind} {tag}", self._members(body, "")))
        else:
            self._function(decl, static=False)

    def _aggregate(self, decl):
        """Reads "struct|union|enum [tag] { body } rest", noting enumerators and
        tags; returns (kind, tag, body tokens, rest tokens)."""
        brace = next(i for i, (_, t) in enumerate(decl) if t == "{")
        end = matching(decl, brace)
        kind = decl[0][1]
        tag = decl[1][1] if brace == 2 else None
        body = decl[brace + 1:end]
        if kind == "enum":
            for item in split_top(body, ","):
                if item:
                    self.enumerators.append(item[0][1])
        if tag:
            self.tags.add(tag)
        return kind, tag, body, decl[end + 1:]

    def _typedef(self, decl):
        if any(t == "{" for _, t in decl):
            kind, tag, body, rest = self._aggregate(decl)
            _, name = declarator_name(rest)
            redecl = f"typedef {kind} {tag} {text_of(rest)};" if tag else None
            if kind != "enum":
                self.aggregates.append((f"{kind} {tag}" if tag else name,
                                        self._members(body, "")))
        else:
            _, name = declarator_name(decl)
            redecl = f"typedef {text_of(decl)};"
        self.typedefs.append((name, redecl))

    def _members(self, body, prefix):
        members = []
        for member in split_top(body, ";"):
            if not member:
                continue
            if any(t == "{" for _, t in member):
                brace = next(i for i, (_, t) in enumerate(member) if t == "{")
                end = matching(member, brace)
                name = text_of(member[end + 1:])
                inner = prefix + name + "." if name else prefix
                if name:
                    members.append((prefix + name, None))
                members.extend(self._members(member[brace + 1:end], inner))
                continue
            if len(split_top(member, ",")) > 1:
                raise Error("several declarators in one member: " + text_of(member))
            idx, name = declarator_name(member)
            members.append((prefix + name, text_of(member[:idx] + member[idx + 1:])))
        return members

    def _function(self, decl, static):
        words = [t for _, t in decl]
        if "(" not in words:
            raise Error("unexpected declaration: " + text_of(decl))
        _, name = declarator_name(decl)
        self.functions.append((name, text_of(decl) + ";", static))

    # ---- macros -------------------------------------------------------

    def _macros(self):
        """{name: (kind, detail)} for every macro the dat2 headers define."""
        defined_here = set()
        for f in self.files:
            with open(os.path.join(self.dat2, f), encoding="utf-8", errors="replace") as fh:
                defined_here.update(re.findall(r"^\s*#\s*define\s+(\w+)", fh.read(), re.M))
        fn, obj = {}, []
        for line in self._cpp(self.umbrella, "-dM").splitlines():
            m = re.match(r"#define (\w+)(\(([^)]*)\))?", line)
            if not m or m.group(1) not in defined_here:
                continue
            if m.group(2) is not None:
                params = [p.strip() for p in m.group(3).split(",") if p.strip()]
                fn[m.group(1)] = ("fmacro", str(len(params)) + (" variadic" if
                                  params and params[-1].endswith("...") else ""))
            else:
                obj.append(m.group(1))
        expanded = self._expand(obj)
        macros = dict(fn)
        for name in obj:
            macros[name] = self._classify(expanded[name])
        return macros

    def _expand(self, names):
        """The full expansion of each object-like macro, by the compiler."""
        marks = "".join(f"\n@ABI@ {i} {n} @ABI@\n" for i, n in enumerate(names))
        out = self._cpp(self.umbrella + marks, "-P")
        found = dict(re.findall(r"@ABI@ (\d+) (.*?) ?@ABI@", out))
        return {n: tokenize(found.get(str(i), "")) for i, n in enumerate(names)}

    def _classify(self, tokens):
        ids = {t for k, t in tokens if k == "id"}
        types = {n for n, _ in self.typedefs} | self.tags
        if tokens and all(k == "str" for k, _ in tokens):
            return ("string", None)
        if tokens and ids <= EXPR_KEYWORDS | types | set(self.enumerators) and \
                any(k == "num" or t in self.enumerators for k, t in tokens):
            return ("const", None)
        if tokens and ids and ids <= TYPE_KEYWORDS | types and \
                all(k == "id" or t == "*" for k, t in tokens):
            return ("typemacro", text_of(tokens))
        return ("macro", text_of(tokens))


def c_string(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


PROBE_PRELUDE = r"""
#include <stdalign.h>
#include <string.h>

/* One name for the C type of an expression; enums show as their
 * underlying integer type. */
#define PROBE_TYPE(x) _Generic((x), \
        _Bool: "_Bool", char: "char", signed char: "signed char", \
        unsigned char: "unsigned char", short: "short", \
        unsigned short: "unsigned short", int: "int", unsigned int: "unsigned int", \
        long: "long", unsigned long: "unsigned long", long long: "long long", \
        unsigned long long: "unsigned long long", float: "float", double: "double", \
        void *: "void *", char *: "char *", const char *: "const char *", \
        default: "other")
#define PROBE_SIGNED(x) _Generic((x), \
        signed char: 1, short: 1, int: 1, long: 1, long long: 1, \
        char: ((char)-1 < 0), default: 0)

/* Integers print as numbers; anything else as its bytes. */
static void probe_value(const char *name, const char *type, int is_signed,
                        const void *p, size_t size)
{
        const unsigned char *b = p;
        unsigned long long v = 0;

        printf("const %s type=%s size=%zu value=", name, type, size);
        if (strcmp(type, "other") != 0 && size <= sizeof(v)) {
                memcpy(&v, p, size);
                if (is_signed && size < sizeof(v) && (v >> (size * 8 - 1)) & 1)
                        v |= ~0ULL << (size * 8);
                if (is_signed)
                        printf("%lld\n", (long long)v);
                else
                        printf("%llu\n", v);
                return;
        }
        for (size_t i = 0; i < size; i++)
                printf("%02x", b[i]);
        printf("\n");
}

#define PROBE_CONST(name) do { \
        __typeof__(name) v_ = (name); \
        probe_value(#name, PROBE_TYPE(v_), PROBE_SIGNED(v_), &v_, sizeof(v_)); \
} while (0)

#define PROBE_OBJECT(kind, type) \
        printf(kind " %s size=%zu align=%zu class=%d type=%s\n", #type, sizeof(type), \
               alignof(type), __builtin_classify_type(*(type *)0), PROBE_TYPE(*(type *)0))

#define PROBE_FIELD(type, path) \
        printf("field %s.%s offset=%zu size=%zu align=%zu class=%d type=%s\n", #type, #path, \
               offsetof(type, path), sizeof(((type *)0)->path), \
               alignof(__typeof__(((type *)0)->path)), \
               __builtin_classify_type(((type *)0)->path), PROBE_TYPE(((type *)0)->path))
"""


def write_probe(h, path):
    lines = [h.umbrella, PROBE_PRELUDE, "int main(void)", "{"]
    emit = lines.append
    for f in h.files:
        emit(f"        puts({c_string('file dat2/' + f)});")
    for name, _ in h.typedefs:
        emit(f"        PROBE_OBJECT(\"typedef\", {name});")
    for key, members in h.aggregates:
        emit(f"        PROBE_OBJECT(\"aggregate\", {key});")
        for member, _ in members:
            emit(f"        PROBE_FIELD({key}, {member});")
    for name in h.enumerators:
        emit(f"        PROBE_CONST({name});")
    for name, (kind, detail) in sorted(h.macros.items()):
        if kind == "const":
            emit(f"        PROBE_CONST({name});")
        elif kind == "string":
            emit(f'        printf("string {name} \\"%s\\"\\n", {name});')
        elif kind == "typemacro":
            emit(f'        printf("typemacro {name} -> %s size=%zu\\n", '
                 f'{c_string(detail)}, sizeof({name}));')
        else:
            emit(f"        puts({c_string(f'{kind} {name} {detail}'.rstrip())});")
    for name, _, static in h.functions:
        emit(f"        puts({c_string(('static-function ' if static else 'function ') + name)});")
    emit("        return 0;")
    emit("}")
    with open(path, "w") as out:
        out.write("/* Generated by tests/abi/abi_probe.py; do not edit. */\n")
        out.write("\n".join(lines) + "\n")


def write_decls(h, path):
    lines = [h.umbrella]
    for _, decl, _ in h.functions:
        lines.append(decl)
    for _, redecl in h.typedefs:
        if redecl:
            lines.append(redecl)
    for key, members in h.aggregates:
        for member, type_text in members:
            if type_text is None:
                continue
            msg = c_string(f"{key}.{member} is not {type_text}")
            lines.append(f"_Static_assert(__builtin_types_compatible_p("
                         f"__typeof__((({key} *)0)->{member}), {type_text}), {msg});")
    with open(path, "w") as out:
        out.write("/* Generated by tests/abi/abi_probe.py; do not edit. */\n")
        out.write("\n".join(lines) + "\n")


def write_linkage(h, path):
    """For C++: every function again inside extern "C", which C++ rejects
    for a function the headers declared with C++ linkage."""
    lines = [h.umbrella, 'extern "C" {']
    lines.extend(decl for _, decl, static in h.functions if not static)
    lines.append("}")
    with open(path, "w") as out:
        out.write("// Generated by tests/abi/abi_probe.py; do not edit.\n")
        out.write("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cc", required=True, help="C compiler command, as configure found it")
    ap.add_argument("--include-dir", required=True, help="directory holding dat2/")
    ap.add_argument("--label", required=True, help="names the output files")
    ap.add_argument("--out-dir", required=True)
    args = ap.parse_args()
    try:
        h = Headers(shlex.split(args.cc), args.include_dir)
        write_probe(h, os.path.join(args.out_dir, f"probe-{args.label}.c"))
        write_decls(h, os.path.join(args.out_dir, f"decls-{args.label}.c"))
        write_linkage(h, os.path.join(args.out_dir, f"linkage-{args.label}.cc"))
    except (Error, OSError) as e:
        print(f"abi_probe.py: {args.label}: {e}", file=sys.stderr)
        return 1
    fields = sum(len(m) for _, m in h.aggregates)
    consts = len(h.enumerators) + sum(1 for k, _ in h.macros.values() if k == "const")
    print(f"{args.label}: {len(h.files)} headers, {len(h.typedefs)} typedefs, "
          f"{len(h.aggregates)} structs/unions with {fields} members, {consts} constants, "
          f"{len(h.macros)} macros, {len(h.functions)} functions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
