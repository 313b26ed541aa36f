#!/usr/bin/env python3
"""Solve recorded OCS-vClos Stage 3 instances again as an ILP (HiGHS).

Input: the JSON lines `examples/stage3_instances.rs` writes, one instance
per line with the exact search's answer (`slice`, `none`, `cutoff`, or
`rescued`: cut off, then placed by the spines-first try).

The ILP is the paper's Appendix A.3 (vClos, Stage 3 of OCS-vClos): `a_n`
virtual leaves on leaf `n`, `t_m` slots on spine `m`, and per pair
`a_n * t_m` links, each through one OCS (within the idle ports of the
(leaf, OCS) and the (spine, OCS)) or over a free direct cable. The product
is linearised exactly: `a_n` is one-hot (`y_nk`, `a_n = sum k y_nk`) and
`u_nkm = y_nk * t_m` by McCormick's inequalities, which are exact for a
binary `y`. It decides feasibility only (no objective): the search's
answer is a slice or a proof that there is none, never an optimum.

Usage:
  stage3_ilp.py INSTANCES.jsonl [--only cutoff|none|slice|rescued] [--limit N]
                [--time-limit S] [--check]

Prints one line per instance and a table of (search answer, ILP status).
With --check, exits 1 if the ILP contradicts the search on any instance it
settled: a `none` the ILP finds a slice for (the search would not be
complete), or a `slice` or `rescued` the ILP proves impossible (the ILP,
or the slice found, would be wrong).
"""
import argparse
import collections
import json
import sys
import time

import highspy

MAX_LINE = 4 << 20  # bytes: an 8192-GPU instance is about 60 KB
MAX_DIM = 4096  # leaves, spines or OCSes in one instance
MAX_CELLS = 4_000_000  # (leaf, spine) pairs times OCSes and values of a_n: the model's size


OUTCOMES = ("slice", "none", "cutoff", "rescued")


class BadInput(Exception):
    pass


def matrix(v, rows, cols, what):
    ok = (
        isinstance(v, list)
        and len(v) == rows
        and all(isinstance(r, list) and len(r) == cols for r in v)
        and all(isinstance(x, int) and 0 <= x < 1 << 20 for r in v for x in r)
    )
    if not ok:
        raise BadInput(f"field problem.{what}: expected {rows} rows of {cols} small non-negative integers")
    return v


def parse(line):
    try:
        d = json.loads(line)
    except json.JSONDecodeError as e:
        raise BadInput(f"not JSON ({e.msg})") from None
    if not isinstance(d, dict) or not isinstance(d.get("problem"), dict):
        raise BadInput("expected an object with a field problem")
    if d.get("outcome") not in OUTCOMES:
        raise BadInput("field outcome: expected slice, none, cutoff or rescued")
    for k in ("l", "s"):
        if not isinstance(d.get(k), int) or not 0 < d[k] < 1 << 20:
            raise BadInput(f"field {k}: expected a positive integer")
    p = d["problem"]
    lm = p.get("leaf_max")
    if not isinstance(lm, list) or len(lm) > MAX_DIM:
        raise BadInput(f"field problem.leaf_max: expected a list of at most {MAX_DIM}")
    nl = len(lm)
    sc = p.get("spine_cap")
    ns = len(sc) if isinstance(sc, list) else -1
    lc = p.get("leaf_cap")
    first = sc[0] if ns > 0 else lc[0] if isinstance(lc, list) and lc else []
    no = len(first) if isinstance(first, list) else -1
    if ns < 0 or ns > MAX_DIM or not 0 <= no <= MAX_DIM:
        raise BadInput(f"field problem.spine_cap: expected at most {MAX_DIM} rows of at most {MAX_DIM}")
    matrix([lm], 1, nl, "leaf_max")
    matrix(lc, nl, no, "leaf_cap")
    matrix(sc, ns, no, "spine_cap")
    matrix(p.get("direct"), nl, ns, "direct")
    cells = nl * ns * (no + 1 + max(lm, default=0))
    if cells > MAX_CELLS:
        raise BadInput(f"instance too large for the ILP: {nl} leaves x {ns} spines x "
                       f"({no} OCSes + values of a_n) = {cells} > {MAX_CELLS} variables")
    return d


def feasible(d, time_limit):
    """HiGHS's status for the instance: kOptimal (a slice exists),
    kInfeasible (none does) or kTimeLimit."""
    l, s, p = d["l"], d["s"], d["problem"]
    lc, sc, direct = p["leaf_cap"], p["spine_cap"], p["direct"]
    nl, ns = len(lc), len(sc)
    if nl == 0 or ns == 0:
        return "kInfeasible"
    no = len(lc[0])
    # The same per-leaf and per-spine bounds the search starts from.
    amax = [min(p["leaf_max"][n], (sum(lc[n]) + sum(direct[n])) // s) for n in range(nl)]
    tmax = [(sum(sc[m]) + sum(direct[n][m] for n in range(nl))) // l for m in range(ns)]
    if sum(amax) < l or sum(tmax) < s:
        return "kInfeasible"  # not enough virtual leaves or slots at all
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("time_limit", float(time_limit))
    h.setOptionValue("threads", 1)
    integer = highspy.HighsVarType.kInteger
    t = [h.addVariable(lb=0, ub=tmax[m], type=integer) for m in range(ns)]
    h.addConstr(sum(t) == s)
    vleaves = []
    pair = [[None] * ns for _ in range(nl)]
    for n in range(nl):
        y = [h.addVariable(lb=0, ub=1, type=integer) for _ in range(amax[n] + 1)]
        h.addConstr(sum(y) == 1)
        vleaves += [k * y[k] for k in range(1, amax[n] + 1)]
        for m in range(ns):
            terms = []
            for k in range(1, amax[n] + 1):
                u = h.addVariable(lb=0, ub=tmax[m])
                h.addConstr(u <= tmax[m] * y[k])
                h.addConstr(u <= t[m])
                h.addConstr(u >= t[m] - tmax[m] * (1 - y[k]))
                terms.append(k * u)
            pair[n][m] = terms
    h.addConstr(sum(vleaves) == l)
    x = {}
    for n in range(nl):
        for m in range(ns):
            links = []
            for o in range(no):
                ub = min(lc[n][o], sc[m][o])
                if ub > 0:
                    x[n, m, o] = h.addVariable(lb=0, ub=ub, type=integer)
                    links.append(x[n, m, o])
            if direct[n][m] > 0:
                links.append(h.addVariable(lb=0, ub=direct[n][m], type=integer))
            if pair[n][m]:
                h.addConstr(sum(links) - sum(pair[n][m]) == 0 if links else sum(pair[n][m]) == 0)
    for n in range(nl):
        for o in range(no):
            row = [x[n, m, o] for m in range(ns) if (n, m, o) in x]
            if row:
                h.addConstr(sum(row) <= lc[n][o])
    for m in range(ns):
        for o in range(no):
            col = [x[n, m, o] for n in range(nl) if (n, m, o) in x]
            if col:
                h.addConstr(sum(col) <= sc[m][o])
    h.run()
    return str(h.getModelStatus()).rsplit(".", 1)[-1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("instances")
    ap.add_argument("--only", choices=OUTCOMES)
    ap.add_argument("--limit", type=int, default=0, help="at most N instances (0: all)")
    ap.add_argument("--time-limit", type=float, default=10.0, help="seconds per instance")
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    table = collections.Counter()
    wrong = []
    done = 0
    with open(a.instances, encoding="utf-8") as f:
        for no, line in enumerate(f, 1):
            if len(line) > MAX_LINE:
                sys.exit(f"{a.instances}:{no}: line longer than {MAX_LINE} bytes")
            if not line.strip():
                continue
            try:
                d = parse(line)
            except BadInput as e:
                sys.exit(f"{a.instances}:{no}: {e}")
            if a.only and d["outcome"] != a.only:
                continue
            t0 = time.monotonic()
            status = feasible(d, a.time_limit)
            dt = time.monotonic() - t0
            table[d["outcome"], status] += 1
            print(f"line {no}: l={d['l']} s={d['s']} leaves={len(d['problem']['leaf_cap'])} "
                  f"spines={len(d['problem']['spine_cap'])} search={d['outcome']} ilp={status} {dt:.2f}s",
                  flush=True)
            if (d["outcome"], status) in (("none", "kOptimal"), ("slice", "kInfeasible"),
                                          ("rescued", "kInfeasible")):
                wrong.append(no)
            done += 1
            if a.limit and done >= a.limit:
                break
    print("search answer  ILP status   instances")
    for (outcome, status), n in sorted(table.items()):
        print(f"{outcome:13}  {status:11}  {n}")
    if a.check and wrong:
        sys.exit(f"{a.instances}: the ILP contradicts the search on lines {wrong}")


if __name__ == "__main__":
    main()
