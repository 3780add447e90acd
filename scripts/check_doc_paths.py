#!/usr/bin/env python3
"""Checks that every repository path the docs name exists.

Usage: check_doc_paths.py ROOT

Reads README.md, ARCHITECTURE.md, CLAUDE.md, CONTRIBUTING.md, backends/nkisim/MODEL.md,
backends/harness/PROTOCOL.md and docs/*.md. A path is a Markdown link target or a backticked
token that starts with one of the repository's top-level entries (`server/...`, `README.md`) or
that looks like a file (`name.ext`) with a folder part. A path counts as existing when it
resolves against the repository root, the document's folder or any folder between them (MODEL.md
names `nkisim/...` from backends/nkisim) or against one of the folders docs use as short roots
(SHORT_ROOTS: `harnesslib/x.py` is backends/harness/harnesslib/x.py). MCP method names
(`tools/call`) and installed artefacts (node_modules, build/) are not paths. Placeholders (`<x>`, `{id}`, `*`, `...`, `NAME`),
absolute paths, home paths and URLs are not paths. A trailing `:LINE` or `#anchor` is dropped.
Prints each missing path with its file and line; exit status 1 when any is missing.
"""
import os
import re
import sys

DOCS = ["README.md", "ARCHITECTURE.md", "CLAUDE.md", "CONTRIBUTING.md",
        "backends/nkisim/MODEL.md", "backends/harness/PROTOCOL.md"]
SHORT_ROOTS = ["backends", "backends/harness", "backends/nkisim", "prompts", "search"]
MCP_NAMESPACES = {"tools", "resources", "prompts", "tasks", "server", "sampling", "roots",
                  "notifications", "completion", "elicitation", "logging"}
LINK = re.compile(r"\]\(([^)\s]+)\)")
TICK = re.compile(r"`([^`\s]+)`")
FILE_LIKE = re.compile(r"^[A-Za-z0-9_.\-/]+\.(py|cpp|hpp|md|json|sh|txt|mjs|toml|yml|yaml|cfg)$")
PLACEHOLDER = re.compile(r"[<>{}*$]|\.\.\.|\b[A-Z][A-Z_]{2,}\b(?!\.md)")


def doc_files(root):
    files = [d for d in DOCS if os.path.isfile(os.path.join(root, d))]
    docs_dir = os.path.join(root, "docs")
    if os.path.isdir(docs_dir):
        files += sorted("docs/" + f for f in os.listdir(docs_dir) if f.endswith(".md"))
    return files


def candidate(token, top_level):
    """The path a token names, or None when it names none."""
    token = token.split("#", 1)[0]
    token = re.sub(r":\d+(-\d+)?$", "", token).rstrip(".,;:")
    if not token or "://" in token or token.startswith(("/", "~", "-", "http")):
        return None
    if PLACEHOLDER.search(token) or "?" in token or "=" in token:
        return None
    if "node_modules" in token or token.startswith("build/"):
        return None
    first = token.split("/", 1)[0]
    if token.count("/") == 1 and first in MCP_NAMESPACES and not os.path.splitext(token)[1]:
        return None
    if first in top_level and (("/" in token) or os.path.splitext(token)[1]):
        return token
    if "/" in token and FILE_LIKE.match(token):
        return token
    return None


def exists(root, doc, path):
    folder = os.path.dirname(doc)
    while True:
        if os.path.exists(os.path.join(root, folder, path.rstrip("/"))):
            return True
        if not folder:
            break
        folder = os.path.dirname(folder)
    return any(os.path.exists(os.path.join(root, short, path.rstrip("/"))) for short in SHORT_ROOTS)


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    root = os.path.abspath(argv[1])
    top_level = {e for e in os.listdir(root) if not e.startswith(".") or e == ".ci"}
    top_level.discard("build")
    missing = []
    checked = 0
    for doc in doc_files(root):
        with open(os.path.join(root, doc), encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                for token in LINK.findall(line) + TICK.findall(line):
                    path = candidate(token, top_level)
                    if path is None:
                        continue
                    checked += 1
                    if not exists(root, doc, path):
                        missing.append(f"{doc}:{number}: {path}")
    for entry in missing:
        print("missing: " + entry)
    print(f"{checked} doc paths checked, {len(missing)} missing")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
