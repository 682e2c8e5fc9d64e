#!/usr/bin/env python3
"""Generates the API-coverage tables of the docs from the public headers, so they cannot drift.

docs/api/seed_items.tsv lists every Python item documented by the seeds (Python tensordict's
TensorDictBase, and a @tensorclass) with the C++ symbols that provide it. This script parses the
declarations of runtime/include/tensordict/**/*.h and templates/*.tmpl (comments stripped, the
project's X-macros expanded, function bodies skipped), decides for each item whether its symbols
are declared, and writes the item table into docs/api-coverage.md and the totals into
docs/compatibility.md, between the `<!-- api-coverage:begin -->` and `<!-- api-coverage:end -->`
markers. CTest runs it with --check (test docs_api_coverage), so a symbol that disappears from a
header, or one that appears without the docs being regenerated, fails the test.

Usage: api_coverage.py --write | --check [--include-root DIR] [--templates DIR] [--data FILE]
Exit code: 0 when the docs match (--check) or were written (--write), 1 when they are stale.
"""

import argparse
import difflib
import fnmatch
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
BEGIN, END = "<!-- api-coverage:begin -->", "<!-- api-coverage:end -->"
SEED_TITLES = {
    "000": "TensorDictBase (seed 000: `PersistentTensorDict`, every `TensorDictBase` method)",
    "001": "@tensorclass (seed 001: `torchrl.envs.llm.IFEvalScoreData`) vs the generated classes",
}
# Words followed by "(" in a declaration that are not the declared name.
KEYWORDS = {"decltype", "alignas", "alignof", "sizeof", "noexcept", "static_assert", "typeid",
            "requires", "throw", "return", "if", "while", "for", "switch", "void", "explicit"}
TOKEN = re.compile(r"[A-Za-z_]\w*|::|->|\S")
IDENT = re.compile(r"[A-Za-z_]\w*$")


# ---- Reading C++ declarations ------------------------------------------------------------------

def strip_comments(text):
    """Replaces comments by a space and string/char literals by "" (newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append(" " + "\n" * text.count("\n", i, end))
            i = end
        elif text[i] == '"' or (text[i] == "'" and not (i and text[i - 1].isalnum())):  # 1'000 is a number
            quote, i = text[i], i + 1
            while i < n and text[i] != quote:
                i += 2 if text[i] == "\\" else 1
            out.append('""')
            i += 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def split_directives(text, macros):
    """Blanks the preprocessor lines; function-like #defines go into `macros` (name -> params, body)."""
    kept = []
    for line in text.replace("\\\n", " ").split("\n"):
        define = re.match(r"\s*#\s*define\s+(\w+)\(([^)]*)\)(.*)", line)
        if define:
            params = [p.strip() for p in define.group(2).split(",") if p.strip()]
            macros[define.group(1)] = (params, define.group(3))
        kept.append("" if line.lstrip().startswith("#") else line)
    return "\n".join(kept)


def balanced(text, start, open_char="(", close_char=")"):
    """Index just past the bracket group opening at text[start]."""
    depth = 0
    for i in range(start, len(text)):
        depth += (text[i] == open_char) - (text[i] == close_char)
        if depth == 0:
            return i + 1
    return len(text)


def expand_macros(text, macros):
    """Expands the function-like macros (X-macro lists included) until no invocation is left."""
    call = re.compile(r"\b(%s)\s*\(" % "|".join(map(re.escape, macros))) if macros else None
    for _ in range(10):
        match = call and call.search(text)
        if not match:
            break
        pieces, pos = [], 0
        while match:
            end = balanced(text, match.end() - 1)
            args, depth, current = [], 0, ""
            for char in text[match.end():end - 1]:  # split at top-level commas, as cpp does
                depth += (char == "(") - (char == ")")
                args, current = (args + [current], "") if char == "," and not depth else (args, current + char)
            params, body = macros[match.group(1)]
            for param, arg in zip(params, args + [current]):
                body = re.sub(r"(?<!\w)%s(?!\w)" % re.escape(param), lambda _: arg.strip(), body)
            pieces += [text[pos:match.start()], " ", re.sub(r"\s*##\s*", "", body), " "]
            pos = end
            match = call.search(text, end)
        text = "".join(pieces) + text[pos:]
    return text


def declared_name(statement):
    """(name, is_function) of what a statement declares: a function, data member, alias or type.
    The name keeps the `A::B::` it is written with; None when the statement declares nothing."""
    tokens = TOKEN.findall(statement)
    while tokens and tokens[0] in ("template", "friend", "typename", "inline", "static"):
        tokens = tokens[1:]
        if tokens and tokens[0] == "<":  # a template parameter list
            depth = 0
            for k, tok in enumerate(tokens):
                depth += (tok == "<") - (tok == ">")
                if depth == 0:
                    break
            tokens = tokens[k + 1:]
    if not tokens or tokens[0] in ("static_assert", "namespace"):
        return None, False
    if tokens[0] in ("using", "typedef", "class", "struct", "union", "enum"):
        words = [t for t in (tokens[:tokens.index("=")] if "=" in tokens else tokens)[1:]
                 if IDENT.match(t) and t not in ("class", "struct", "namespace")]
        pick = -1 if tokens[0] in ("using", "typedef") else 0
        return (words[pick] if words and tokens[1:2] != ["namespace"] else None), False
    candidates, depth, closing = [], {"(": 0, "<": 0, "[": 0}, {")": "(", ">": "<", "]": "["}
    for k, tok in enumerate(tokens):
        top = not any(depth.values())
        if tok == "operator" and top:
            rest = "".join(tokens[k + 1:])
            return "::".join(qualifiers(tokens, k) + ["operator" + ("()" if rest.startswith("()")
                                                                    else rest.split("(", 1)[0])]), True
        if tok == "(" and top and k and IDENT.match(tokens[k - 1]) and tokens[k - 1] not in KEYWORDS:
            candidates.append(k - 1)
        if tok in depth and (tok != "<" or not depth["("]):
            depth[tok] += 1
        elif tok in closing and (tok != ">" or not depth["("]):
            depth[closing[tok]] = max(0, depth[closing[tok]] - 1)
        elif tok in ("=", "{") and top and not candidates:
            break
    if candidates:  # the first name called like a function; an ALL_CAPS one may be a macro
        k = ([k for k in candidates if not tokens[k].isupper()] or candidates)[0]
        return "::".join(qualifiers(tokens, k) + [tokens[k]]), True
    head = re.split(r"[={\[]|(?<!:):(?!:)", " ".join(tokens).replace(" :: ", "::"), maxsplit=1)[0]
    words = [w for w in re.findall(r"[A-Za-z_]\w*", head) if w not in ("const", "override", "final")]
    return (words[-1] if words else None), False


def qualifiers(tokens, k):
    """The `A::B::` written before tokens[k] (template arguments skipped)."""
    quals = []
    while k >= 2 and tokens[k - 1] == "::":
        k -= 2
        depth = 0
        while k >= 0 and (tokens[k] == ">" or depth):
            depth += (tokens[k] == ">") - (tokens[k] == "<")
            k -= 1
        if k < 0 or not IDENT.match(tokens[k]):
            break
        quals.insert(0, tokens[k])
    return quals


def declarations(text):
    """Qualified names declared by a comment-free, macro-expanded header (function bodies and
    initializers skipped, so names used there do not count)."""
    text = re.sub(r"\b(public|protected|private)\s*:(?!:)", ";", text)
    names, scopes, statement, i = set(), [], "", 0

    def record(stmt):
        name = declared_name(stmt)[0]
        if name:
            names.add("::".join([s for s in scopes if s] + [name]))

    while i < len(text):
        char = text[i]
        if char == "{":
            head = re.sub(r"^\s*template\s*<.*?>\s*(?=class|struct|union)", "", statement, flags=re.S).strip()
            type_scope = re.match(r"(?:class|struct|union)\b([^(]*)$", head, re.S)
            namespace = re.match(r"(?:inline\s+)?namespace\b\s*([\w:]*)\s*$|extern\s*\"\"\s*$", head)
            nested_in_call = statement.count("(") != statement.count(")")
            if (type_scope or namespace) and not nested_in_call:
                record(statement)
                if type_scope:
                    bases = re.sub(r"<.*>", "", re.split(r"(?<!:):(?!:)", type_scope.group(1))[0])
                    words = [w for w in re.findall(r"[A-Za-z_]\w*", bases) if w != "final"]
                    scopes.append(words[-1] if words else "")
                else:
                    scopes.append(namespace.group(1) or "")
                statement, i = "", i + 1
                continue
            if not nested_in_call and declared_name(statement)[1]:  # a function body
                record(statement)
                statement = ""
            else:  # an initializer, a lambda in a default argument, an enum's list
                statement += "{}"
            i = balanced(text, i, "{", "}")
            continue
        if char in "};":
            if char == ";":
                record(statement)
            else:
                scopes = scopes[:-1]
            statement = ""
        else:
            statement += char
        i += 1
    return names


def read_declarations(include_root, templates):
    """{file key: set of qualified names}: headers keyed by their path under include_root,
    templates as templates/NAME.tmpl ({{X}} placeholders read as X, {{..._DOC}} ones as nothing)."""
    sources = {str(p.relative_to(include_root)): p for p in sorted(include_root.rglob("*.h"))}
    sources.update({"templates/" + p.name: p for p in sorted(templates.glob("*.tmpl"))})
    macros, texts = {}, {}
    for key, path in sources.items():
        text = re.sub(r"\{\{\w*_DOC\}\}", "", strip_comments(path.read_text(encoding="utf-8")))
        texts[key] = split_directives(re.sub(r"\{\{(\w+)\}\}", r"\1", text), macros)
    return {key: declarations(expand_macros(text, macros)) for key, text in texts.items()}


# ---- The data file and the tables --------------------------------------------------------------

def read_items(path):
    """The rows of the data file; exits with a message on a malformed one."""
    items, seen = [], set()
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith(("#", "seed\t")):
            continue
        fields = line.split("\t")
        if len(fields) != 5 or not fields[1].isdigit() or fields[0] not in SEED_TITLES \
                or (fields[0], fields[2]) in seen or (fields[3] == "n/a" and not fields[4]):
            sys.exit(f"{path}:{number}: malformed, duplicate or unjustified row: {line!r}")
        seen.add((fields[0], fields[2]))
        alternatives = [] if fields[3] == "n/a" else [
            [tuple(part.strip() for part in symbol.split(":", 1)) for symbol in alt.split(" + ")]
            for alt in fields[3].split(" | ")]
        if any(len(symbol) != 2 for alt in alternatives for symbol in alt):
            sys.exit(f"{path}:{number}: a symbol reads 'HEADER: Qualified::name': {line!r}")
        items.append(dict(seed=fields[0], line=int(fields[1]), python=fields[2],
                          alternatives=alternatives, note=fields[4]))
    return items


def is_declared(symbol, decls):
    header, name = symbol
    return any(fnmatch.fnmatchcase(key, header) and any(d == name or d.endswith("::" + name) for d in names)
               for key, names in decls.items())


def resolve(item, decls):
    """(status, C++ cell) of an item; status is yes, "yes (as X)", missing or n/a."""
    if not item["alternatives"]:
        return "n/a", "— " + item["note"]
    found = next((alt for alt in item["alternatives"] if all(is_declared(s, decls) for s in alt)), None)
    cpp = " or ".join(" + ".join(f"`{name}` ({header})" for header, name in alt)
                      for alt in ([found] if found else item["alternatives"]))
    cpp += ": " + item["note"] if item["note"] else ""
    if found is None:
        return "missing", cpp
    short = [name.split("::")[-1] for _, name in found]
    if all(name == item["python"] for name in short):
        return "yes", cpp
    usage = re.match(r"`[^`]+`(?:\s*[/+]\s*`[^`]+`)*", item["note"])  # the note's leading code
    return "yes (as " + (usage.group(0) if usage else " + ".join(f"`{n}`" for n in short)) + ")", cpp


def totals(statuses):
    present, items, na = sum(s.startswith("yes") for s in statuses), len(statuses), statuses.count("n/a")
    percent = lambda part, whole: f"{100.0 * part / whole:.1f}%" if whole else "—"
    return (f"{items} | {present} ({sum(s.startswith('yes (as') for s in statuses)}) | {na} "
            f"| {statuses.count('missing')} | {percent(present, items - na)} | {percent(present, items)}")


def render(items, decls):
    """(text for docs/api-coverage.md: totals, then one table per seed; text for
    docs/compatibility.md: the totals)."""
    resolved = [(item,) + resolve(item, decls) for item in items]
    summary = ["| Python API | items | present (under another name) | n/a | missing "
               "| present / items not n/a | present / all items |", "|---|---|---|---|---|---|---|"]
    tables = []
    for seed, title in SEED_TITLES.items():
        rows = [r for r in resolved if r[0]["seed"] == seed]
        summary.append(f"| {title} | {totals([status for _, status, _ in rows])} |")
        missing = ", ".join(f"`{item['python']}`" for item, status, _ in rows if status == "missing")
        tables += ["", f"## {title}", "", f"Missing: {missing or 'none'}.", "",
                   "| Python | seed line | C++ | status |", "|---|---|---|---|"]
        tables += [f"| `{item['python']}` | L{item['line']} | {cpp.replace('|', chr(92) + '|')} | "
                   f"{'**missing**' if status == 'missing' else status} |" for item, status, cpp in rows]
    summary.append(f"| both | {totals([status for _, status, _ in resolved])} |")
    return "\n".join(summary + tables), "\n".join(summary)


def replace_between_markers(path, body):
    text = path.read_text(encoding="utf-8")
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        sys.exit(f"{path}: no {BEGIN} ... {END} markers")
    return text[:start + len(BEGIN)] + "\n" + body + "\n" + text[end:]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="rewrite the generated parts of the docs")
    mode.add_argument("--check", action="store_true", help="exit 1 with a diff when the docs are stale")
    parser.add_argument("--include-root", type=pathlib.Path, default=ROOT / "runtime/include/tensordict")
    parser.add_argument("--templates", type=pathlib.Path, default=ROOT / "templates")
    parser.add_argument("--data", type=pathlib.Path, default=ROOT / "docs/api/seed_items.tsv")
    parser.add_argument("--docs", type=pathlib.Path, default=ROOT / "docs")
    args = parser.parse_args()
    full, summary = render(read_items(args.data), read_declarations(args.include_root, args.templates))
    stale = 0
    for path, body in ((args.docs / "api-coverage.md", full), (args.docs / "compatibility.md", summary)):
        old, new = path.read_text(encoding="utf-8"), replace_between_markers(path, body)
        if old != new and args.write:
            path.write_text(new, encoding="utf-8")
            print(f"wrote {path}")
        elif old != new:
            stale += 1
            sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), new.splitlines(True),
                                                       f"{path} (as committed)", f"{path} (from the headers)"))
    if stale:
        print(f"\n{stale} doc(s) differ from the headers: run /usr/bin/python3 scripts/api_coverage.py --write")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
