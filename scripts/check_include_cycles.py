#!/usr/bin/env python3
"""Fails when the source folders include each other in a cycle.

The units are the top-level source folders (core, backends, search, server, tools, app) and, inside
search/, each subfolder (search/engine, search/store, ...). An edge A -> B means a file under A
includes a header under B. Prints every cycle found (as a path of folders with one including file
per step) and exits 1; exits 0 when the folder graph is acyclic.

Usage: scripts/check_include_cycles.py [ROOT]
"""

import os
import re
import sys

TOP_LEVEL = ("core", "backends", "search", "server", "tools", "app")
SPLIT = {"search"}  # folders whose subfolders are units of their own
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)


def unit_of(path):
    """The unit a repository-relative path belongs to, or None outside the source folders."""
    parts = path.split("/")
    if parts[0] not in TOP_LEVEL:
        return None
    if parts[0] in SPLIT and len(parts) > 2:
        return parts[0] + "/" + parts[1]
    return parts[0]


def include_graph(root):
    """{unit: {included unit: first including file}}."""
    graph = {}
    for top in TOP_LEVEL:
        base = os.path.join(root, top)
        for folder, _dirs, files in os.walk(base):
            for name in sorted(files):
                if not name.endswith((".cpp", ".hpp")):
                    continue
                path = os.path.join(folder, name)
                relative = os.path.relpath(path, root).replace(os.sep, "/")
                source = unit_of(relative)
                with open(path, encoding="utf-8", errors="replace") as handle:
                    text = handle.read()
                for header in INCLUDE.findall(text):
                    target = unit_of(header)
                    if target is None or target == source:
                        continue
                    graph.setdefault(source, {}).setdefault(target, relative)
    return graph


def find_cycles(graph):
    """Each elementary cycle once, as a list of units starting at its smallest name."""
    cycles = set()

    def walk(start, node, path, seen):
        for following in sorted(graph.get(node, {})):
            if following == start:
                cycles.add(tuple(path))
            elif following not in seen and following > start:
                walk(start, following, path + [following], seen | {following})

    for start in sorted(graph):
        walk(start, start, [start], {start})
    return sorted(cycles)


def main(argv):
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    graph = include_graph(root)
    cycles = find_cycles(graph)
    for cycle in cycles:
        steps = []
        for i, unit in enumerate(cycle):
            following = cycle[(i + 1) % len(cycle)]
            steps.append(f"{unit} -> {following} ({graph[unit][following]})")
        print("include cycle: " + "; ".join(steps))
    if cycles:
        return 1
    print(f"no include cycles between {len(graph)} source folders")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
