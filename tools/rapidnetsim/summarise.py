#!/usr/bin/env python3
"""Summarise a RapidNetSim task_time.log (lines `taskid,N,arriving_time|start_time|finish_time,T`)
into avg JCT / JRT / JWT, the names vclos replay --json uses.

Written for vclos's issue-14 validation (docs/network-validation.md); no
RapidNetSim code is copied. RapidNetSim is fetched and run separately.

Usage: summarise.py task_time.log POLICY [WALL_S] [--per-job out.csv]
"""
import json
import sys


def main():
    path, policy = sys.argv[1], sys.argv[2]
    wall = float(sys.argv[3]) if len(sys.argv) > 3 and not sys.argv[3].startswith('--') else None
    per_job = sys.argv[sys.argv.index('--per-job') + 1] if '--per-job' in sys.argv else None
    t = {}
    for line in open(path):
        parts = line.strip().removeprefix('debug ').split(',')  # 5-tuple tasks log arrivals as 'debug taskid,...'
        if len(parts) != 4 or parts[0] != 'taskid':
            continue
        t.setdefault(int(parts[1]), {})[parts[2]] = float(parts[3])
    done = [k for k, v in t.items() if 'finish_time' in v and 'start_time' in v]
    n = len(done)
    jct = sum(t[k]['finish_time'] - t[k]['arriving_time'] for k in done) / n
    jrt = sum(t[k]['finish_time'] - t[k]['start_time'] for k in done) / n
    jwt = sum(t[k]['start_time'] - t[k]['arriving_time'] for k in done) / n
    if per_job:
        with open(per_job, 'w') as f:
            f.write('task,arrival,start,finish\n')
            for k in sorted(done):
                f.write(f"{k},{t[k]['arriving_time']},{t[k]['start_time']},{t[k]['finish_time']}\n")
    print(json.dumps({'policy': policy, 'jobs': len(t), 'completed': n, 'avg_jct_s': round(jct, 1),
                      'avg_jrt_s': round(jrt, 1), 'avg_jwt_s': round(jwt, 1),
                      'wall_s': round(wall, 2) if wall else None}))


if __name__ == '__main__':
    main()
