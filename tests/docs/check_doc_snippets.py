#!/usr/bin/env python3
"""Checks that every ```cpp block of the docs appears verbatim in a compiled snippet file.

With --python-doc NAME, the ```python blocks of docs/NAME must appear verbatim in a *.py file of
the snippets directory too (those files are run by CTest; the other docs' Python blocks show
Python tensordict, which is not installable here). A .py snippet names its section with
"# docs/<file>.md#<section>".

The docs' C++ snippets are mirrored in examples/docs_snippets/*.cpp, which the main build
compiles and CTest runs; this check keeps the two from drifting apart. A block matches when its
lines appear consecutively in one snippet file, all shifted right by the same indentation (so a
snippet may sit inside a function body). Each snippet file must name the doc section it mirrors
("// docs/<file>.md#<section>"), and every such reference must point at an existing doc file.

Usage: check_doc_snippets.py --docs DIR --snippets DIR [--also DIR...] [--doc FILE...]
--also: more compiled sources (e.g. examples/) whose text counts as mirrored too; they need not
name a doc section.
Relative markdown links of the docs must point at an existing file inside the repository.
Exit code 0 when every block is found and every link resolves, 1 otherwise (one line each).
"""

import argparse
import pathlib
import re
import sys

FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")
DOC_REFERENCE = re.compile(r"(?://|#)\s*(?:docs/)?([\w.-]+\.md)(#[\w-]+)?")


def cpp_blocks(path, languages=("cpp", "c++")):
    """Yields (line number of the first code line, [lines]) for each block in `languages`."""
    lines = path.read_text(encoding="utf-8").splitlines()
    block, start, lang = None, 0, None
    for number, line in enumerate(lines, 1):
        match = FENCE.match(line)
        if block is None:
            if match and match.group(2):
                block, start, lang = [], number + 1, match.group(2)
            elif match:
                block, start, lang = [], number + 1, ""
        elif match and not match.group(2):
            if lang in languages:
                yield start, block
            block = None
        else:
            block.append(line)
    if block is not None:
        raise SystemExit(f"{path}:{start - 1}: unterminated code block")


def contains_shifted(haystack, needle):
    """True when `needle` lines occur consecutively in `haystack`, all indented by one amount."""
    needle = [line.rstrip() for line in needle]
    while needle and not needle[-1]:
        needle.pop()
    while needle and not needle[0]:
        needle.pop(0)
    if not needle:
        return True
    haystack = [line.rstrip() for line in haystack]
    first = needle[0]
    for start, line in enumerate(haystack):
        if not line.endswith(first) or start + len(needle) > len(haystack):
            continue
        indent = line[: len(line) - len(first)]
        if indent.strip():
            continue
        if all((h == indent + n) if n else not h for h, n in zip(haystack[start:], needle)):
            return True
    return False


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", required=True, type=pathlib.Path)
    parser.add_argument("--snippets", required=True, type=pathlib.Path)
    parser.add_argument("--also", action="append", default=[], type=pathlib.Path)
    parser.add_argument("--doc", action="append", default=[], type=pathlib.Path,
                        help="one more markdown file to check (the README)")
    parser.add_argument("--python-doc", action="append", default=[],
                        help="a doc (file name) whose python blocks are mirrored in snippets/*.py")
    args = parser.parse_args()

    docs = sorted(args.docs.glob("*.md")) + args.doc
    snippet_files = sorted(args.snippets.glob("*.cpp"))
    python_files = sorted(args.snippets.glob("*.py")) if args.python_doc else []
    if not docs or not snippet_files:
        print(f"no docs in {args.docs} or no snippets in {args.snippets}")
        return 1
    snippets = {path: path.read_text(encoding="utf-8").splitlines() for path in snippet_files + python_files}
    also = {path: path.read_text(encoding="utf-8").splitlines()
            for directory in args.also for path in sorted(directory.glob("*.cpp"))}
    # C++ schema headers of the snippets (compiled by tdgen's Clang frontend and by the snippet
    # programs that include what it generates from them).
    also.update({path: path.read_text(encoding="utf-8").splitlines()
                 for path in sorted(args.snippets.glob("schemas/*.h"))})

    errors = []
    doc_names = {doc.name for doc in docs}
    for path, lines in snippets.items():
        references = DOC_REFERENCE.findall("\n".join(lines))
        if not references:
            errors.append(f"{path}: names no doc section (add a '// docs/<file>.md#<section>' comment)")
        for name, _ in references:
            if name not in doc_names:
                errors.append(f"{path}: refers to docs/{name}, which does not exist")

    # Relative links must point at a file of the repository (a user has nothing beside it).
    root = args.docs.resolve().parent
    for doc in docs:
        for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            for target in LINK.findall(line):
                if re.match(r"^[a-z]+:", target):
                    continue  # http:, https:, mailto:
                resolved = (doc.parent / target).resolve()
                if root not in resolved.parents and resolved != root:
                    errors.append(f"{doc}:{number}: link {target} leaves the repository")
                elif not resolved.exists():
                    errors.append(f"{doc}:{number}: link {target} points at nothing")

    checked = 0
    for doc in docs:
        for line, block in cpp_blocks(doc):
            checked += 1
            sources = list(snippets.values()) + list(also.values())
            if not any(contains_shifted(lines, block) for lines in sources):
                errors.append(f"{doc}:{line}: cpp block not found verbatim in any snippet file "
                              f"of {args.snippets} (first line: {block[0].strip() if block else ''!r})")

    python_sources = [snippets[path] for path in python_files]
    for doc in docs:
        if doc.name not in args.python_doc:
            continue
        for line, block in cpp_blocks(doc, ("python",)):
            checked += 1
            if not any(contains_shifted(lines, block) for lines in python_sources):
                errors.append(f"{doc}:{line}: python block not found verbatim in any .py snippet file "
                              f"of {args.snippets} (first line: {block[0].strip() if block else ''!r})")

    for error in errors:
        print(error)
    if errors:
        print(f"FAILED: {len(errors)} problem(s) in {checked} block(s)")
        return 1
    print(f"OK: {checked} block(s) of {len(docs)} doc file(s) found in "
          f"{len(snippets) + len(also)} compiled file(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
