#!/usr/bin/env python3
# Measures what `vclos serve` adds to a device transaction (issue 17 target:
# <= 5 ms): N submissions of a JOB_GPUS-GPU job and N releases, one at a
# time, each timed by curl (-w %{time_total}) against the answer's
# `timings`: `transaction_ms` (the controller's device transaction) and
# `outside_transaction_ms` (placement, per-device diffs, journal and
# state.json, inside the service). Prints medians and maxima.
# Usage: python3 benches/serve_overhead.py target/release/vclos [N] [JOB_GPUS]
# (the emulated testbed-ocs fabric, OCS switching at 0 ms, in a temp dir).
import json, os, statistics, subprocess, sys, tempfile

binary = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 20
gpus = int(sys.argv[3]) if len(sys.argv) > 3 else 24
here = os.path.dirname(os.path.abspath(__file__))
source = os.path.join(here, "..", "topologies", "testbed-ocs.yaml")
env = dict(os.environ, VCLOS_EMU_PASSWORD="admin")
procs = []


def start(args):
    p = subprocess.Popen([binary] + args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    procs.append(p)
    return p.stdout.readline().decode()


def curl(url, method, body=None):
    cmd = ["curl", "-sS", "-o", "-", "-w", "\n%{time_total}", "-X", method, url,
           "-H", f"Authorization: Bearer {token}"]
    if body:
        cmd += ["-H", "Content-Type: application/json", "--data-binary", body]
    out = subprocess.run(cmd, capture_output=True, check=True).stdout.decode()
    text, secs = out.rsplit("\n", 1)
    return json.loads(text), float(secs) * 1e3


with tempfile.TemporaryDirectory() as d:
    try:
        topo, state, tok = (os.path.join(d, f) for f in ("emu.yaml", "state", "token"))
        start(["emu", "serve", "--topology", source, "--switch-delay-ms", "0", "--write-topology", topo])
        subprocess.run([binary, "reconcile", "--fix", "--init", "--topology", topo, "--state", state],
                       check=True, capture_output=True, env=env)
        token = "bench-token-0123456789abcdef"
        open(tok, "w").write(token + "\n")
        url = start(["serve", "--topology", topo, "--state", state, "--listen", "127.0.0.1:0",
                     "--token-file", tok]).strip().rsplit(" ", 1)[1]
        rows = {"submit": [], "release": []}
        for i in range(n):
            a, ms = curl(f"{url}/v1/jobs", "POST", json.dumps({"id": f"o{i}", "gpus": gpus}))
            rows["submit"].append((ms, a["timings"]))
            r, ms = curl(f"{url}/v1/jobs/o{i}", "DELETE")
            rows["release"].append((ms, r["timings"]))
        for what, rs in rows.items():
            total = [ms for ms, _ in rs]
            tx = [t["transaction_ms"] for _, t in rs]
            over = [ms - t["transaction_ms"] for ms, t in rs]
            inside = [t["outside_transaction_ms"] for _, t in rs]
            http = [ms - t["total_ms"] for ms, t in rs]
            med = statistics.median
            print(f"{what}: round trip {med(total):.2f} ms, transaction {med(tx):.2f} ms, "
                  f"overhead {med(over):.2f} ms (max {max(over):.2f}): "
                  f"HTTP+curl {med(http):.2f} ms, in the service {med(inside):.2f} ms")
    finally:
        for p in procs:
            p.terminate()
            p.wait()
