//! Circuits of one stage (issue 19 item 3; seed 003 Algorithm 2 lines 9-18,
//! Eq. 2 and the port constraint Eq. 6; seed 004 full duplex).
//!
//! A *link* is what one circuit can serve: in half duplex (003: "a
//! connection can provide bandwidth in only one direction"), an ordered pod
//! pair with demand; in full duplex with symmetric circuits (004: "a single
//! connection can simultaneously provide bandwidth in both directions"), an
//! unordered pair, whose demand is the larger direction. A circuit is one
//! OCS cross-connect between an OCS port cabled to an uplink of each pod,
//! so it takes one port of each pod on one OCS; Eq. 6 (each pod's circuits,
//! both directions counted, at most its ports) holds because a pod's
//! circuits take distinct ports of its own.
//!
//! Algorithm 2:
//!
//! 1. line 9: one circuit per link with demand (L = LB). If some pair has
//!    no OCS with a free port of both pods, the grouping is rejected
//!    ([`Shortage`]): the OCS is never oversized;
//! 2. line 10: T_tor = max_i D_i / B_tor;
//! 3. lines 11-17: the link with the largest completion time T_ij = D_ij /
//!    (B L_ij) gets one more circuit, until T_tor >= max T_ij or that link's
//!    pods have no OCS with a free port of both;
//! 4. line 18 and Eq. 2: t_comm = max(T_tor, max T_ij).
//!
//! A circuit goes on the OCS where both pods have the most free ports
//! (lowest index on ties), so a pod group spread over several OCS devices
//! fills them evenly.

use super::traffic::Demand;

/// The OCS ports of one pod group: `ports[pod][ocs]` lists the indices of
/// the ports of the group's `ocs`-th OCS that are cabled to the pod's
/// uplinks, ascending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupPorts {
    pub ports: Vec<Vec<Vec<u16>>>,
}

impl GroupPorts {
    pub fn pods(&self) -> usize {
        self.ports.len()
    }
    fn free(&self) -> Vec<Vec<usize>> {
        self.ports
            .iter()
            .map(|p| p.iter().map(Vec::len).collect())
            .collect()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Duplex {
    /// 003: a circuit carries one direction during a stage.
    Half,
    /// 004: a circuit carries both directions.
    Full,
}

/// Pods `a` and `b` need a circuit and no OCS has a free port of both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shortage {
    pub a: usize,
    pub b: usize,
}

/// What one link carries and the OCS of each of its circuits.
#[derive(Debug, Clone, PartialEq)]
pub struct Link {
    /// From pod `a` to pod `b` (half duplex); `a < b` in full duplex.
    pub a: usize,
    pub b: usize,
    /// Demand, Gbit (full duplex: the larger direction).
    pub gbit: f64,
    /// The group-local OCS of each circuit.
    pub circuits: Vec<u16>,
}

impl Link {
    fn time(&self, gbps: f64) -> f64 {
        if self.gbit <= 0.0 {
            0.0
        } else {
            self.gbit / (gbps * self.circuits.len() as f64)
        }
    }
}

/// The circuits of one stage and its communication time.
#[derive(Debug, Clone, PartialEq)]
pub struct Alloc {
    pub links: Vec<Link>,
    /// Eq. 2: max(T_tor, max T_ij), seconds.
    pub t_comm: f64,
}

/// The links of `d`, ordered by unordered pair then direction, so that a
/// demand and its mirror image get the same circuits.
fn links(d: &Demand, duplex: Duplex) -> Vec<Link> {
    let mut out = Vec::new();
    for a in 0..d.pods {
        for b in a + 1..d.pods {
            let (ab, ba) = (d.at(a, b), d.at(b, a));
            let mut push = |a, b, gbit: f64| {
                if gbit > 0.0 {
                    out.push(Link {
                        a,
                        b,
                        gbit,
                        circuits: Vec::new(),
                    });
                }
            };
            match duplex {
                Duplex::Full => push(a, b, ab.max(ba)),
                Duplex::Half => {
                    push(a, b, ab);
                    push(b, a, ba);
                }
            }
        }
    }
    out
}

/// Take a port of `a` and of `b` on the OCS where both have the most free.
fn take(free: &mut [Vec<usize>], a: usize, b: usize) -> Option<u16> {
    let o = (0..free[a].len())
        .filter(|&o| free[a][o] > 0 && free[b][o] > 0)
        .max_by_key(|&o| (free[a][o].min(free[b][o]), std::cmp::Reverse(o)))?;
    free[a][o] -= 1;
    free[b][o] -= 1;
    Some(o as u16)
}

/// T_tor (Algorithm 2 line 10).
fn tor_time(d: &Demand, b_tor: &[f64]) -> f64 {
    d.tor
        .iter()
        .zip(b_tor)
        .map(|(g, b)| g / b)
        .fold(0.0, f64::max)
}

/// Algorithm 2 lines 9-18 for the demand `d`.
pub fn allocate(
    d: &Demand,
    duplex: Duplex,
    ports: &GroupPorts,
    gbps: f64,
    b_tor: &[f64],
) -> Result<Alloc, Shortage> {
    let mut free = ports.free();
    let mut links = links(d, duplex);
    for l in &mut links {
        let o = take(&mut free, l.a, l.b).ok_or(Shortage { a: l.a, b: l.b })?;
        l.circuits.push(o);
    }
    let t_tor = tor_time(d, b_tor);
    loop {
        let worst = links
            .iter()
            .enumerate()
            .map(|(k, l)| (k, l.time(gbps)))
            .fold(None, |m: Option<(usize, f64)>, x| match m {
                Some(m) if m.1 >= x.1 => Some(m),
                _ => Some(x),
            });
        let Some((k, t)) = worst else { break };
        if t_tor >= t {
            break;
        }
        let l = &mut links[k];
        match take(&mut free, l.a, l.b) {
            Some(o) => l.circuits.push(o),
            None => break,
        }
    }
    let t_comm = links.iter().map(|l| l.time(gbps)).fold(t_tor, f64::max);
    Ok(Alloc { links, t_comm })
}

/// The circuits of `alloc` per unordered pod pair, each pair's OCS sorted:
/// equal signatures mean equal cross-connect maps ([`cross_connects`]).
pub fn signature(alloc: &Alloc) -> Vec<(usize, usize, u16)> {
    let mut s: Vec<(usize, usize, u16)> = alloc
        .links
        .iter()
        .flat_map(|l| l.circuits.iter().map(|&o| (l.a.min(l.b), l.a.max(l.b), o)))
        .collect();
    s.sort_unstable();
    s
}

/// A stage on fixed circuits (`map`, from [`signature`]): the non-TDM
/// baseline keeps one static map, so its pull stage runs on its push
/// stage's circuits. In half duplex each pair's circuits are split between
/// the two directions to minimise the slower one. `None` if a demand has no
/// circuit.
pub fn on_map(
    d: &Demand,
    duplex: Duplex,
    map: &[(usize, usize, u16)],
    gbps: f64,
    b_tor: &[f64],
) -> Option<Alloc> {
    let mut links: Vec<Link> = Vec::new();
    let mut i = 0;
    while i < map.len() {
        let (a, b) = (map[i].0, map[i].1);
        let n = map[i..].iter().take_while(|c| (c.0, c.1) == (a, b)).count();
        let circuits: Vec<u16> = map[i..i + n].iter().map(|c| c.2).collect();
        i += n;
        let (ab, ba) = (d.at(a, b), d.at(b, a));
        let x = match duplex {
            Duplex::Full => {
                links.push(Link {
                    a,
                    b,
                    gbit: ab.max(ba),
                    circuits,
                });
                continue;
            }
            Duplex::Half => split(ab, ba, n)?,
        };
        links.push(Link {
            a,
            b,
            gbit: ab,
            circuits: circuits[..x].to_vec(),
        });
        links.push(Link {
            a: b,
            b: a,
            gbit: ba,
            circuits: circuits[x..].to_vec(),
        });
    }
    links.retain(|l| !l.circuits.is_empty());
    let served = |a: usize, b: usize| {
        links
            .iter()
            .any(|l| (l.a, l.b) == (a, b) || (duplex == Duplex::Full && (l.b, l.a) == (a, b)))
    };
    let unserved = (0..d.pods).any(|a| (0..d.pods).any(|b| d.at(a, b) > 0.0 && !served(a, b)));
    if unserved {
        return None;
    }
    let t_comm = links
        .iter()
        .map(|l| l.time(gbps))
        .fold(tor_time(d, b_tor), f64::max);
    Some(Alloc { links, t_comm })
}

/// How many of `n` circuits carry `ab` (the rest carry `ba`).
fn split(ab: f64, ba: f64, n: usize) -> Option<usize> {
    match (ab > 0.0, ba > 0.0) {
        (false, _) => Some(0),
        (true, false) => Some(n),
        (true, true) if n < 2 => None,
        (true, true) => (1..n).min_by(|&x, &y| {
            let t = |x: usize| (ab / x as f64).max(ba / (n - x) as f64);
            t(x).total_cmp(&t(y))
        }),
    }
}

/// One cross-connect: group-local OCS, the OCS port indices of pod `a`'s and
/// pod `b`'s ends, and the index of the link it serves in `alloc.links`.
pub type CrossConnect = (u16, u16, u16, usize);

/// The cross-connects of `alloc`: per unordered pod pair (ascending), per
/// OCS, the next free port of each pod (ascending). The same [`signature`]
/// always gives the same ports.
pub fn cross_connects(alloc: &Alloc, ports: &GroupPorts) -> Vec<CrossConnect> {
    let mut circuits: Vec<(usize, usize, u16, usize)> = alloc
        .links
        .iter()
        .enumerate()
        .flat_map(|(k, l)| {
            l.circuits
                .iter()
                .map(move |&o| (l.a.min(l.b), l.a.max(l.b), o, k))
        })
        .collect();
    circuits.sort_unstable();
    let mut next = vec![vec![0usize; ports.ports.first().map_or(0, Vec::len)]; ports.pods()];
    let mut out = Vec::with_capacity(circuits.len());
    for (a, b, o, k) in circuits {
        let oi = o as usize;
        let (pa, pb) = (
            ports.ports[a][oi][next[a][oi]],
            ports.ports[b][oi][next[b][oi]],
        );
        next[a][oi] += 1;
        next[b][oi] += 1;
        out.push((o, pa, pb, k));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one_ocs(pods: usize, per_pod: u16) -> GroupPorts {
        GroupPorts {
            ports: (0..pods)
                .map(|p| vec![(0..per_pod).map(|k| p as u16 * per_pod + k).collect()])
                .collect(),
        }
    }

    #[test]
    fn the_largest_completion_time_gets_the_next_circuit() {
        let mut d = Demand::new(3);
        d.pair[1] = 300.0; // 0 -> 1
        d.pair[2] = 100.0; // 0 -> 2
        let ports = one_ocs(3, 4);
        let a = allocate(&d, Duplex::Half, &ports, 100.0, &[1e9; 3]).unwrap();
        let count = |b| a.links.iter().find(|l| l.b == b).unwrap().circuits.len();
        // Pod 0 has 4 ports: 0->1 gets 3 (T = 1 s), 0->2 one (T = 1 s).
        assert_eq!((count(1), count(2)), (3, 1));
        assert!((a.t_comm - 1.0).abs() < 1e-12);
        // A ToR bottleneck (T_tor = 800 / 400 = 2 s) stops the allocation
        // once every link is below it: 0->1 gets 2 circuits (1.5 s).
        d.tor[0] = 800.0;
        let tor = allocate(&d, Duplex::Half, &ports, 100.0, &[400.0, 1e9, 1e9]).unwrap();
        assert_eq!(tor.links.iter().map(|l| l.circuits.len()).sum::<usize>(), 3);
        assert!((tor.t_comm - 2.0).abs() < 1e-12);
    }

    #[test]
    fn first_circuits_beyond_the_ports_are_a_shortage() {
        let mut d = Demand::new(3);
        for (i, j) in [(0, 1), (1, 0), (0, 2)] {
            d.pair[i * 3 + j] = 1.0;
        }
        let ports = one_ocs(3, 2);
        assert_eq!(
            allocate(&d, Duplex::Half, &ports, 1.0, &[1.0; 3]),
            Err(Shortage { a: 0, b: 2 })
        );
        // Full duplex serves 0 <-> 1 with one circuit: it fits.
        let a = allocate(&d, Duplex::Full, &ports, 1.0, &[1.0; 3]).unwrap();
        assert_eq!(signature(&a), vec![(0, 1, 0), (0, 2, 0)]);
    }

    #[test]
    fn a_static_map_serves_the_mirrored_demand() {
        let mut push = Demand::new(2);
        push.pair[1] = 200.0;
        let ports = one_ocs(2, 4);
        let a = allocate(&push, Duplex::Half, &ports, 100.0, &[1e9; 2]).unwrap();
        let mut pull = Demand::new(2);
        pull.pair[2] = 200.0;
        let s = on_map(&pull, Duplex::Half, &signature(&a), 100.0, &[1e9; 2]).unwrap();
        assert_eq!(signature(&s), signature(&a));
        assert!((s.t_comm - a.t_comm).abs() < 1e-12);
        let xc = cross_connects(&s, &ports);
        assert_eq!(xc.len(), 4);
        assert!(xc.iter().all(|c| c.1 < 4 && (4..8).contains(&c.2)));
    }
}
