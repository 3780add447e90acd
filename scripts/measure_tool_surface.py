#!/usr/bin/python3
"""Prints what an agent reads from the server: the size of `tools/list` and of every tool answer
in one agent round on the rmsnorm seed, through the real server over stdio.

    scripts/measure_tool_surface.py BINARY [--list-only] [--full-size]

One round: verify, benchmark, profile and propose_plan on seeds/rmsnorm/naive.py; the file is
then changed to seeds/rmsnorm/tunable.py and benchmarked; record_reflexion; run_beam_search
(knob autotuning, one iteration); get_search_status; revert_to_best(run_id); record_reflexion.
Sizes are characters of the JSON-RPC `result` as the server sent it (text and structured
content), and of the text block alone. The problem runs at its small size (AUTOCOMP_SMALL=1)
unless --full-size.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Server:
    def __init__(self, binary, db, env):
        self.proc = subprocess.Popen([binary, "--db", db, "--log-level", "off"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=env, text=True)
        self.next_id = 1

    def request(self, method, params):
        rid = self.next_id
        self.next_id += 1
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method,
                                          "params": params}) + "\n")
        self.proc.stdin.flush()
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("the server closed its output")
            message = json.loads(line)
            if message.get("id") == rid:
                if "error" in message:
                    raise RuntimeError("%s: %s" % (method, message["error"]))
                # the result exactly as sent: the line minus the envelope
                return message["result"], len(json.dumps(message["result"],
                                                         separators=(",", ":"),
                                                         ensure_ascii=False))

    def notify(self, method):
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": method}) + "\n")
        self.proc.stdin.flush()

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def text_of(result):
    return "".join(item.get("text", "") for item in result.get("content", [])
                   if item.get("type") == "text")


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    binary = sys.argv[1]
    env = dict(os.environ)
    if "--full-size" not in sys.argv:
        env["AUTOCOMP_SMALL"] = "1"
    work = tempfile.mkdtemp(prefix="tool_surface_")
    try:
        server = Server(binary, os.path.join(work, "store.db"), env)
        server.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                      "clientInfo": {"name": "measure", "version": "1"}})
        server.notify("notifications/initialized")
        tools, size = server.request("tools/list", {})
        print("tools/list: %d characters, %d tools" % (size, len(tools["tools"])))
        resources, _ = server.request("resources/list", {})
        print("resources/list: %d resources" % len(resources.get("resources", [])))
        if "--list-only" in sys.argv:
            server.close()
            return 0
        kernel = os.path.join(work, "kernel.py")
        problem = os.path.join(work, "problem.py")
        shutil.copy(os.path.join(ROOT, "seeds", "rmsnorm", "naive.py"), kernel)
        shutil.copy(os.path.join(ROOT, "seeds", "rmsnorm", "problem.py"), problem)
        args = {"kernel": kernel, "problem": problem}
        rows = []

        def call(label, name, arguments):
            result, size = server.request("tools/call", {"name": name, "arguments": arguments})
            rows.append((label, size, len(text_of(result)), result.get("isError", False)))
            return result

        call("verify_kernel", "verify_kernel", args)
        call("benchmark_kernel", "benchmark_kernel", args)
        call("profile_kernel", "profile_kernel", args)
        call("propose_plan", "propose_plan", args)
        shutil.copy(os.path.join(ROOT, "seeds", "rmsnorm", "tunable.py"), kernel)
        call("benchmark_kernel (changed)", "benchmark_kernel", args)
        call("record_reflexion", "record_reflexion",
             {"kernel": kernel, "expected": "fewer passes", "lessons": "one pass over a row"})
        started = call("run_beam_search", "run_beam_search",
                       dict(args, iterations=1, use_client_model=False, wait_s=50))
        run_id = started.get("structuredContent", {}).get("run_id", "")
        call("get_search_status", "get_search_status", {"run_id": run_id, "wait_s": 50})
        call("revert_to_best", "revert_to_best", {"kernel": kernel, "run_id": run_id})
        call("record_reflexion (after revert)", "record_reflexion",
             {"kernel": kernel, "lessons": "the search's knobs won"})
        server.close()
        print("%-34s %8s %8s" % ("answer", "chars", "text"))
        for label, size, text, error in rows:
            print("%-34s %8d %8d%s" % (label, size, text, "  (error)" if error else ""))
        print("%-34s %8d %8d" % ("total", sum(r[1] for r in rows), sum(r[2] for r in rows)))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
