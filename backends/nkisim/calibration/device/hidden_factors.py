#!/usr/bin/env python3
"""Print the hidden cost table of the FAKE device `sim-perturbed` for a seed: a test tool, so
tests and demos can measure how well a calibration recovered it.

    /usr/bin/python3 backends/nkisim/calibration/device/hidden_factors.py --seed N --target T
        [--base-table FILE]

stdout: {"target", "seed", "factors": {FIELD: factor}, "values": {FIELD: hidden value}
(every field), "digest"}. Exit 2 with {"error"} on bad input.
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SIM_DIR = os.path.dirname(os.path.dirname(HERE))
for _p in (SIM_DIR, HERE):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from costtables import costs  # noqa: E402


def hidden(seed, target, base=None):
    t = costs.perturbed_table(seed, target, base=base)
    return {"target": target, "seed": seed,
            "factors": costs.perturbation_factors(seed, target),
            "values": costs.values_of(t), "digest": costs.digest(t)}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--target", default="trn1", choices=sorted(costs.CALIBRATABLE))
    p.add_argument("--base-table", default=None)
    args = p.parse_args(argv)
    try:
        if args.seed < 0:
            raise ValueError("--seed must be a non-negative integer")
        base = (costs.load_override(args.base_table, args.target)[0]
                if args.base_table else None)
        out = hidden(args.seed, args.target, base)
    except (ValueError, costs.CostTableError) as e:
        print(json.dumps({"error": str(e)}))
        return 2
    print(json.dumps(out, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
