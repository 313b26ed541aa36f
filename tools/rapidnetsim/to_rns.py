#!/usr/bin/env python3
"""Convert a vclos trace CSV + a uniform leaf-spine shape into a RapidNetSim
experiment file (exp.ini), for the issue-14 validation (docs/network-validation.md).

Written for vclos; no RapidNetSim code is copied here. RapidNetSim
(GitHub nothepeople/RapidNetSim) is fetched and run separately, outside
this repository; it is never vendored. This script only writes its input.

What it writes (the input format RapidNetSim's `rapidnetsim/main.py` reads
with configparser: sections [Parameter], [Topology], [Task]):

* the topology: NIC i under leaf NIC_num + i // (gpus per leaf), one link
  between every leaf and every spine (the uniform Clos of
  topologies/cluster512*.yaml without the OCS layer, which RapidNetSim's
  OCS scheduler models itself);
* one task per trace row, in arrival order, as RapidNetSim's 5-tuple
  (arrival_s, model_size, gpus, computation_time_s, iterations=1), chosen so
  that on an isolated network the job runs exactly `duration_s`:
  computation = (1 - comm_fraction) * duration, and model_size such that
  RapidNetSim's own step model (Ring strategy, 100 units/s per fabric link,
  `--inner-bw` inside a server) takes comm_fraction * duration to
  communicate. Jobs inside one server (gpus <= gpus per server) get
  model_size 0 and computation = duration (their traffic never reaches the
  fabric in either simulator).
* the policy: `ecmp` = static_scheduler + find_next_hop_method random,
  `sr` = static_scheduler + static_routing, `ocs-vclos` = GPUPlacemeter3 +
  reconfiguration (RapidNetSim's released OCS-vClos).

Usage:
  python3 tools/rapidnetsim/to_rns.py --trace t.csv --policy ecmp \
      --leaves 32 --spines 16 --gpus-per-server 8 --servers-per-leaf 2 \
      [--inner-bw 1000000] > exp.ini
Then run it with tools/rapidnetsim/run.sh (see there).
"""
import argparse
import csv
import sys

FABRIC_BW = 100.0  # RapidNetSim's switch_port_bandwidth (its templates' value)


def is_pow2(n):
    return n > 0 and n & (n - 1) == 0


def comm_time_per_unit(n, g, inner_bw, fabric_bw=FABRIC_BW):
    """Isolated communication time of one unit of model_size for an n-GPU job
    under RapidNetSim's Ring strategy (as read in
    rapidnetsim/communication_strategy/ring.py, Ring.get_task_a_iteration_pair_list),
    g GPUs per server, GPUs listed server by server. Each step lasts as long
    as its slowest flow: size / bandwidth of the link class it uses."""
    if n <= g:
        # flat ring, 2(n-1) steps of 1/(2n), all inside one server
        return 2 * (n - 1) * (1.0 / (2 * n)) / inner_bw
    if not is_pow2(n):
        # flat ring over the largest power of two p <= n GPUs (the others idle),
        # 2(p-1) steps of 1/(2p); some flows cross servers (p > g)
        p = 1 << (n.bit_length() - 1)
        return 2 * (p - 1) * (1.0 / (2 * p)) / fabric_bw
    m = n // g
    # hierarchical: g-1 intra steps of 1/g, m inter-server steps of 1/(g m), g-1 intra steps of 1/g
    return 2 * (g - 1) * (1.0 / g) / inner_bw + m * (1.0 / (g * m)) / fabric_bw


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--trace', required=True)
    ap.add_argument('--policy', required=True, choices=['ecmp', 'sr', 'ocs-vclos'])
    ap.add_argument('--leaves', type=int, default=32)
    ap.add_argument('--spines', type=int, default=16)
    ap.add_argument('--gpus-per-server', type=int, default=8)
    ap.add_argument('--servers-per-leaf', type=int, default=2)
    ap.add_argument('--inner-bw', type=float, default=1e6,
                    help='intra-server bandwidth (RapidNetSim default 1000 = 10x a fabric link; '
                         'large = NVLink time negligible, as in vclos)')
    ap.add_argument('--seed', type=int, default=10)
    a = ap.parse_args()

    g = a.gpus_per_server
    per_leaf = g * a.servers_per_leaf
    nic_num = per_leaf * a.leaves
    assert per_leaf == a.spines, 'one uplink per spine per leaf: gpus per leaf must equal spines'

    rows = []
    with open(a.trace) as f:
        lines = [l for l in f if l.strip() and not l.startswith('#')]
    for r in csv.DictReader(lines):
        n = int(r['gpus'])
        dur = float(r['duration_s'])
        cf = r.get('comm_fraction') or ''
        alpha = float(cf) if cf != '' else 0.3
        rows.append((float(r['arrival_s']), n, dur, alpha, r['job_id']))
    rows.sort(key=lambda x: x[0])  # stable, as vclos's parser

    tasks = []
    for arr, n, dur, alpha, _ in rows:
        if n <= g or alpha == 0:
            tasks.append((round(arr, 6), 0, n, round(dur, 6), 1))
        else:
            model = alpha * dur / comm_time_per_unit(n, g, a.inner_bw)
            tasks.append((round(arr, 6), round(model, 6), n, round(dur * (1 - alpha), 6), 1))

    leaf0 = nic_num
    spine0 = nic_num + a.leaves
    if a.policy == 'ocs-vclos':
        sched, hop, reconf, connect = 'GPUPlacemeter3', 'static_routing', 'yes', []
    else:
        sched = 'static_scheduler'
        hop = 'random' if a.policy == 'ecmp' else 'static_routing'
        reconf = 'no'
        connect = []
        for nic in range(nic_num):
            connect += [(nic, leaf0 + nic // per_leaf, 1), (leaf0 + nic // per_leaf, nic, 1)]
        for l in range(a.leaves):
            for s in range(a.spines):
                connect += [(spine0 + s, leaf0 + l, 1), (leaf0 + l, spine0 + s, 1)]

    out = sys.stdout
    out.write(f"""[Parameter]
seed = {a.seed}
NIC_num = {nic_num}
NIC_num_in_a_server = {g}
leaf_switch_num = {a.leaves}
leaf_switch_port_num = {2 * per_leaf}
spine_switch_port_num = {a.leaves}
spine_switch_num = {a.spines}
inner_server_bandwidth = {a.inner_bw}
switch_port_bandwidth = {FABRIC_BW:g}
computation_time = 1
joint_scheduler = {sched}
downlinks =
measure_sampling_interval = 10
find_path_method = shortest
find_next_hop_method = {hop}
greedy = yes
bandwidth_allocation =
TCP_type =
core_run_type =
time_tick =
reconfiguration = {reconf}
network_transmission_delay =
inserver_transmission_delay =
non_overlap_ratio =

[Topology]
topo_type = clos
connect_info_list = {connect}

[Task]
task_type = ring
task_iteration_num = 1
waiting_task_order_mode = FIFO
task_list = {tasks}
flow_arrivals_list =
""")


if __name__ == '__main__':
    main()
