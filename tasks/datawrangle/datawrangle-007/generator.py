"""Generated check of datawrangle-007: the procedure run on freshly drawn source trees.

Each input set is a new tree under ``project/``: Python, shell, JavaScript, TypeScript and C
files (and Markdown, JSON, text files that are not scanned) in nested directories, with the
excluded places the instruction names (``vendor`` and ``node_modules`` at any depth, hidden
files and directories) and names that only look like them (``vendors/``, ``vendor.py``), and
path names whose byte order differs from a per-directory order (``app-cli/`` against
``app/``, capitals). The comment lines use every rule: ``#`` comments (also after a ``#``
inside a string), ``//`` and ``/* */`` comments (also after ``//`` inside a URL), block
continuation lines, markers only in strings or docstrings, ``TODO``/``FIXME`` against
``todo``, ``TODOS``, ``NOTODO``, ``TODO_X``, owners in parentheses (padded, empty, or not
immediately after the marker), colons, a trailing ``*/``, two markers on one line, empty
texts, texts with commas and quotes. The CSV has a fixed layout and must equal the
reference's byte for byte; the JSON summary must hold the same object (its layout is not fixed).
"""

INPUTS = ["project/"]
OUTPUTS = ["out/todos.csv", "out/todo_summary.json"]

OWNERS = ["maria", "li.wei", "dev-ops", "jo", "sam", "ops", "kim_p"]
TEXTS = [
    "qty must never go negative",
    "connections leak when close() raises",
    "lazy import to speed up start",
    "move colours into the settings module",
    "validate the schema first",
    "handle 429",
    'handle "1.234,56" style decimals',
    "retry with exponential backoff",
    "clamp pct to [0, 100]",
    "wrong for negative values",
    "document rounding mode",
    "rotate old backups",
    "keep 7 daily copies",
    "read from env",
    "paginate properly",
    "keyboard navigation",
    "naïve timestamps, use UTC",
    "the spinner never hides on error",
    "check free space first",
    "remove after v2, see #123",
    "a: b: c",
    "50% of the time it fails",
    "see issue #42 # and #43",
]
PLAIN = [
    "plain comment",
    "XXX: not a tracked marker",
    "todo: lowercase markers are ignored",
    "TODOS and NOTODO are not markers",
    "see TODO_LIST for details",
    "FIXME2 is not a marker",
    "MY_FIXME too",
    "Todo: wrong case",
    "nothing to do here",
    "café au lait",
]
PY_CODE = [
    "x = 1",
    "return value",
    "import os",
    "def helper(a, b):",
    "    total += a * b",
    "pass",
    'print("TODO list is empty")',
    '"""TODO in a docstring is not a comment."""',
    "items = []",
    "for i in range(10):",
    'if __name__ == "__main__":',
    'name = "FIXME later"',
]
SH_CODE = [
    'echo "done"',
    "set -eu",
    "HOST=${HOST:-staging}",
    'rsync -az ./dist/ "$HOST:/srv/"',
    "exit 0",
    'echo "TODO: not a comment"',
    'cd "$(dirname "$0")"',
]
JS_CODE = [
    "const state = { items: [], page: 1 };",
    "render();",
    "return res.json();",
    "let total = a * b;",
    'document.title = "TODO app";',
    "export default api;",
    "}",
    'if (!ok) throw new Error("FIXME");',
]
C_CODE = [
    '#include "fastmath.h"',
    "#define TODO_LIMIT 10",
    "return price * (1.0 - pct / 100.0);",
    "double v = a * b;",
    "}",
    "int main(void) {",
    "#ifndef FASTMATH_H",
    "*ptr = TODO_LIMIT;",
]


def _marker_text(rng):
    """The part of a comment from a marker on (the marker is found in it)."""
    tag = rng.choice(["TODO", "TODO", "TODO", "FIXME", "FIXME"])
    text = rng.choice(TEXTS)
    k = rng.randrange(14)
    if k == 0:
        return f"{tag}: {text}"
    if k == 1:
        return f"{tag} {text}"
    if k == 2:
        return f"{tag}({rng.choice(OWNERS)}): {text}"
    if k == 3:
        return f"{tag}({rng.choice(OWNERS)}) {text}"
    if k == 4:
        return f"{tag} ({rng.choice(OWNERS)}): {text}"
    if k == 5:
        return f"{tag}( {rng.choice(OWNERS)} ):{text}"
    if k == 6:
        return rng.choice([f"{tag}:", f"{tag}", f"{tag}:   ", f"{tag}()", f"{tag}() : {text}"])
    if k == 7:
        other = "FIXME" if tag == "TODO" else "TODO"
        return f"{tag}: {other}: both tags on one line"
    if k == 8:
        return f"{tag}:: {text}"
    if k == 9:
        return f"{tag}({rng.choice(OWNERS)}):{text}"
    if k == 10:
        return f"{tag}:\t{text}\t"
    if k == 11:
        return f"{tag}-{text}"
    if k == 12:
        return f"{tag}.{text}"
    return f"{tag}({rng.choice(OWNERS)})"


def _comment_body(rng):
    """A comment's text: a marker somewhere in it, or none."""
    r = rng.random()
    if r < 0.45:
        return " " + _marker_text(rng)
    if r < 0.55:
        return " " + rng.choice(["note", "see", "x.", "(", "-"]) + " " + _marker_text(rng)
    if r < 0.6:
        return _marker_text(rng)
    return " " + rng.choice(PLAIN)


def _hash_line(rng, code):
    k = rng.random()
    indent = rng.choice(["", "", "    ", "\t", "        "])
    if k < 0.35:
        return indent + rng.choice(code)
    if k < 0.6:
        return indent + "#" + _comment_body(rng)
    if k < 0.85:
        return indent + rng.choice(code) + rng.choice(["  ", " ", "\t"]) + "#" + _comment_body(rng)
    if k < 0.92:  # a '#' inside a string starts the comment text too
        return (
            indent
            + rng.choice(['THEME = "#1f2937"  #', 's = "# ', 'url = "http://x/#frag"  #'])
            + _comment_body(rng)
        )
    return rng.choice(["#!/bin/sh", "#!/usr/bin/env python3", "# -*- coding: utf-8 -*-", ""])


def _slash_line(rng, code, state):
    indent = rng.choice(["", "", "  ", "    ", "\t"])
    if state["block"]:
        k = rng.random()
        if k < 0.25:
            state["block"] = False
            return indent + " */"
        if k < 0.3:
            state["block"] = False
            return indent + " *" + _comment_body(rng) + " */"
        return indent + " *" + rng.choice(["", " ", "   "]) + _comment_body(rng)
    k = rng.random()
    if k < 0.3:
        return indent + rng.choice(code)
    if k < 0.45:
        return indent + "//" + _comment_body(rng)
    if k < 0.6:
        return indent + rng.choice(code) + " //" + _comment_body(rng)
    if k < 0.7:
        return indent + "/*" + _comment_body(rng) + rng.choice([" */", "*/", " */ ", ""])
    if k < 0.75:
        return indent + rng.choice(code) + " /*" + _comment_body(rng) + " */"
    if k < 0.8:
        return indent + 'const API = "https://api.example.com/v1"; //' + _comment_body(rng)
    if k < 0.85:
        return indent + "/* " + _marker_text(rng) + " */ render();"
    if k < 0.92:
        state["block"] = True
        return indent + rng.choice(["/*", "/**", "/*" + _comment_body(rng)])
    return ""


def _source(rng, ext):
    n = rng.randint(0, 25)
    lines = []
    state = {"block": False}
    for _ in range(n):
        if ext == ".py":
            lines.append(_hash_line(rng, PY_CODE))
        elif ext == ".sh":
            lines.append(_hash_line(rng, SH_CODE))
        elif ext in (".js", ".ts"):
            lines.append(_slash_line(rng, JS_CODE, state))
        else:
            lines.append(_slash_line(rng, C_CODE, state))
    if state["block"]:
        lines.append(" */")
    text = "\n".join(lines)
    if lines and rng.random() < 0.85:
        text += "\n"
    return text


SCANNED_DIRS = [
    "app",
    "app/db",
    "app/api",
    "scripts",
    "web/src",
    "web/src/components",
    "native",
    "lib",
    "app-cli",
    "tools",
    "vendors",
    "web/src/node_modules_patch",
    "App",
]
SKIPPED_DIRS = [
    "vendor",
    "vendor/minijson",
    "web/node_modules/leftpad",
    "node_modules/x",
    ".github/scripts",
    "app/.cache",
    "lib/vendor",
    "web/src/vendor",
    ".hidden/hooks",
    "app/db/node_modules",
]
BASES = [
    "main",
    "utils",
    "models",
    "api",
    "index",
    "deploy",
    "backup",
    "fastmath",
    "helpers",
    "Config",
    "vendor",
    "_private",
    "z_last",
    "a-b",
    "cli",
]
EXTS = [".py", ".py", ".sh", ".js", ".ts", ".c", ".h"]


def inputs(rng):
    files = {}
    for _ in range(rng.randint(6, 16)):
        ext = rng.choice(EXTS)
        path = f"project/{rng.choice(SCANNED_DIRS)}/{rng.choice(BASES)}{ext}"
        files[path] = _source(rng, ext)
    for _ in range(rng.randint(1, 3)):  # scanned at the top of the tree too, maybe
        ext = rng.choice(EXTS)
        files[f"project/{rng.choice(BASES)}{ext}"] = _source(rng, ext)
    for _ in range(rng.randint(2, 5)):  # excluded places: the same kind of content, never reported
        ext = rng.choice(EXTS)
        files[f"project/{rng.choice(SKIPPED_DIRS)}/{rng.choice(BASES)}{ext}"] = _source(rng, ext)
    for _ in range(rng.randint(1, 3)):  # hidden files next to scanned ones
        ext = rng.choice(EXTS)
        files[f"project/{rng.choice(SCANNED_DIRS)}/.{rng.choice(BASES)}{ext}"] = _source(rng, ext)
    for name, text in [
        ("README.md", "# project\n\nTODO: this README is out of date\n"),
        ("app/settings.json", '{"todo": "TODO: json is not scanned"}\n'),
        ("docs/notes.txt", "# TODO: text files are not scanned\n"),
        ("scripts/run.py.bak", "# TODO: not a .py file\n"),
        ("Makefile", "# TODO(ops): not scanned\nall:\n\t@echo ok\n"),
        ("web/src/style.css", "/* TODO: css is not scanned */\n"),
    ]:
        if rng.random() < 0.6:
            files[f"project/{name}"] = text
    # at least one marker in a scanned file
    ext = rng.choice(EXTS)
    lead = "#" if ext in (".py", ".sh") else "//"
    files[f"project/{rng.choice(SCANNED_DIRS)}/{rng.choice(BASES)}{ext}"] = (
        f"{lead} {_marker_text(rng)}\n" + _source(rng, ext)
    )
    return files
