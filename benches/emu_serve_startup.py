#!/usr/bin/env python3
# Measures `vclos emu serve`: time to the first stdout line (the endpoint map,
# printed once every device is listening), memory after start, and one TL1
# DLT-PATCH::ALL (the OCS asks the busy oracle about every port, which parses
# each far switch's running config once).
# Usage: python3 benches/emu_serve_startup.py target/release/vclos topologies/cluster2048-ocs.yaml [RUNS]
import subprocess, sys, time, os, json, socket
binary, topo = sys.argv[1], sys.argv[2]
runs = int(sys.argv[3]) if len(sys.argv) > 3 else 5
for _ in range(runs):
    t0 = time.monotonic()
    p = subprocess.Popen([binary, "emu", "serve", "--topology", topo], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    line = p.stdout.readline()
    t1 = time.monotonic()
    eps = json.loads(line)
    time.sleep(0.5)
    st = {l.split(':')[0]: l.split(':')[1].strip() for l in open(f"/proc/{p.pid}/status") if ':' in l}
    # One TL1 DLT-PATCH::ALL on an OCS: every far switch's config is parsed once.
    ocs = [v for k, v in eps.items() if v["protocol"] == "telnet-tl1"][0]
    s = socket.create_connection(("127.0.0.1", ocs["port"]))
    def cmd(c):
        s.sendall((c + "\r\n").encode()); buf = b""
        while not buf.rstrip().endswith(b";") or b"M " not in buf:
            buf += s.recv(65536)
        return buf.decode()
    cmd("ACT-USER::admin:1::admin;")
    t2 = time.monotonic(); r = cmd("DLT-PATCH::ALL:2;"); t3 = time.monotonic()
    t4 = time.monotonic(); r2 = cmd("RTRV-PATCH::ALL:3;"); t5 = time.monotonic()
    st2 = {l.split(':')[0]: l.split(':')[1].strip() for l in open(f"/proc/{p.pid}/status") if ':' in l}
    print(f"devices={len(eps)} ready={1000*(t1-t0):.0f}ms VmRSS={st['VmRSS']} VmHWM={st['VmHWM']} "
          f"dlt-all={1000*(t3-t2):.0f}ms ({'COMPLD' if 'COMPLD' in r else r.strip()[:80]}) VmHWM-after={st2['VmHWM']}")
    p.terminate(); p.wait()
