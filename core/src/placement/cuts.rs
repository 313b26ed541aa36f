//! Stage 3's pair-blind relaxations as minimum cuts over sets of OCSes
//! (paper Appendix A.3; issue 13: cheaper exact-search nodes).
//!
//! Every node of the exact search ([`super::stage3`]) asks max-flow
//! questions of one layered graph: leaves -> OCSes -> spines (the A.3
//! constraints on the idle ports of each (leaf, OCS) and (spine, OCS)
//! pair, links counted but not paired), with one aggregate node for the
//! leaves (spines) not decided yet; or, per chosen leaf, spines -> OCSes
//! -> that leaf; or, per spine, chosen leaves -> OCSes -> that spine.
//! Built and solved per node, those flows were most of the search's work
//! (a graph of ~1 600 edges per node at 8192 GPUs).
//!
//! When no direct (non-OCS) cable is free, which is every node on an
//! all-OCS fabric, every path between the two outer layers goes through
//! one of the `k` OCS nodes. A cut is then fixed, up to independent
//! choices, by the set `A` of OCSes it leaves on the source side: every
//! other node takes whichever side is cheaper for it alone, e.g. a leaf
//! sending `x` links costs `min(x, its ports on OCSes outside A)`, a spine
//! taking `y` costs `min(y, its ports on OCSes in A)`, an aggregate node
//! `min(its total, the sum over its members)`. By max-flow = min-cut, a
//! relaxation holds exactly when every one of the `2^k` sets `A` gives a
//! cut at least the links asked for. With each switch's ports per OCS
//! subset tabulated once per search, and the sums over decided leaves
//! (spines) kept per depth of the search, one check costs `2^k`
//! additions and comparisons (256 with 8 OCS) instead of a graph: the
//! same answers, so the same slices, cutoffs and decisions (tests compare
//! whole searches, budget left included, with the flow form).
//!
//! With a free direct cable (a leaf and a spine joined without an OCS)
//! the cut no longer splits this way, and with more than [`MAX_OCS`]
//! OCSes the tables grow too large: the search keeps its flows there.

use super::stage3::Problem;

/// Most OCSes the tables are built for (`2^k` subsets each).
pub const MAX_OCS: usize = 10;

/// Tables of port counts per OCS subset for one search, and the sums
/// along its current path. Rows are `sets` long; `x[r]` is row `r`.
pub struct Cuts {
    /// Subsets of the OCSes: `2^k`.
    sets: usize,
    l: u32,
    s: u32,
    /// Leaf `n`'s idle ports on OCSes outside `A`, and in total.
    lco: Vec<u32>,
    ltot: Vec<u32>,
    /// Spine `m`'s idle ports on OCSes in `A`, and in total.
    sci: Vec<u32>,
    stot: Vec<u32>,
    /// Row `i`: what leaves `i..` can send, `sum min(leaf_max * s, lco)`.
    later: Vec<u32>,
    /// What every spine can take at level 1, at most `l * s`.
    spines0: Vec<u32>,
    /// Row `i`: what the decided leaves `0..i` send, `sum min(a_n * s, lco)`.
    fixed: Vec<u32>,
    /// The row of `fixed` with every chosen leaf (level 2).
    full: usize,
    /// Row `j`: what spines `j..` can take, `sum min(tmax * l, sci)`.
    tlater: Vec<u32>,
    /// Row `j`: what the decided spines `0..j` take, `sum min(t_m * l, sci)`.
    tfixed: Vec<u32>,
    /// The distinct `a_n` of the chosen leaves.
    avals: Vec<u32>,
    /// Per distinct chosen leaf: (leaf, index into `avals`).
    senders: Vec<(usize, usize)>,
    /// Per `a` value `q`, row `j`: spines `j..` towards a leaf hosting `a`
    /// virtual leaves, `sum min(a * tmax, sco)`; and spines `0..j`.
    send_later: Vec<u32>,
    send_fixed: Vec<u32>,
    /// Row `t - 1`: what the chosen leaves send one spine of `t` slots,
    /// `sum min(a_n * t, lco)` (filled as `t` grows).
    takes: Vec<u32>,
}

impl Cuts {
    /// The tables for `p`, or `None` when the flows must stay (a free
    /// direct cable, no OCS, or more than [`MAX_OCS`]).
    pub fn new(
        p: &Problem,
        (l, s): (u32, u32),
        leaf_max: &[u32],
        spine_max: &[u32],
    ) -> Option<Self> {
        let k = p.spine_cap.first().map_or(0, Vec::len);
        if k == 0 || k > MAX_OCS || p.direct.iter().flatten().any(|&d| d > 0) {
            return None;
        }
        let sets = 1usize << k;
        let (nl, ns) = (p.leaf_cap.len(), p.spine_cap.len());
        let mut c = Cuts {
            sets,
            l,
            s,
            lco: vec![0; nl * sets],
            ltot: p.leaf_cap.iter().map(|c| c.iter().sum()).collect(),
            sci: vec![0; ns * sets],
            stot: p.spine_cap.iter().map(|c| c.iter().sum()).collect(),
            later: vec![0; (nl + 1) * sets],
            spines0: vec![0; sets],
            fixed: vec![0; (nl + 1) * sets],
            full: 0,
            tlater: vec![0; (ns + 1) * sets],
            tfixed: vec![0; (ns + 1) * sets],
            avals: Vec::new(),
            senders: Vec::new(),
            send_later: Vec::new(),
            send_fixed: Vec::new(),
            takes: Vec::new(),
        };
        for (n, caps) in p.leaf_cap.iter().enumerate() {
            let row = &mut c.lco[n * sets..(n + 1) * sets];
            subset_sums(caps, row);
            let tot = c.ltot[n];
            row.iter_mut().for_each(|x| *x = tot - *x);
        }
        for (m, caps) in p.spine_cap.iter().enumerate() {
            subset_sums(caps, &mut c.sci[m * sets..(m + 1) * sets]);
        }
        for n in (0..nl).rev() {
            let cap = leaf_max[n] * s;
            for a in 0..sets {
                c.later[n * sets + a] = c.later[(n + 1) * sets + a] + cap.min(c.lco[n * sets + a]);
            }
        }
        for (m, &most) in spine_max.iter().enumerate() {
            let cap = most * l;
            for a in 0..sets {
                c.spines0[a] += cap.min(c.sci[m * sets + a]);
            }
        }
        c.spines0.iter_mut().for_each(|x| *x = (*x).min(l * s));
        Some(c)
    }

    /// Level 1 at leaf `i`, `left` virtual leaves still to place (the
    /// relaxation `links_fit((i, left), (0, s), None)` of the search).
    pub fn leaves_fit(&self, i: usize, left: u32) -> bool {
        let r = self.sets;
        let (fixed, later) = (
            &self.fixed[i * r..(i + 1) * r],
            &self.later[i * r..(i + 1) * r],
        );
        let want = self.l * self.s;
        let open = left * self.s;
        (0..r).all(|a| fixed[a] + open.min(later[a]) + self.spines0[a] >= want)
    }

    /// Leaf `i` hosts `v` virtual leaves: the sums of row `i + 1`.
    pub fn set_leaf(&mut self, i: usize, v: u32) {
        let r = self.sets;
        let cap = v * self.s;
        let (head, tail) = self.fixed.split_at_mut((i + 1) * r);
        let (from, to) = (&head[i * r..], &mut tail[..r]);
        let lco = &self.lco[i * r..(i + 1) * r];
        for a in 0..r {
            to[a] = from[a] + cap.min(lco[a]);
        }
    }

    /// `a` is complete at depth `i` (leaves `i..` host none): prepare the
    /// spine level for it. `chosen` are the distinct chosen leaves
    /// (first of each group of alike leaves with the same `a_n`).
    pub fn begin_spines(&mut self, i: usize, a: &[u32], chosen: &[usize]) {
        self.full = i;
        self.avals.clear();
        for &n in chosen {
            if !self.avals.contains(&a[n]) {
                self.avals.push(a[n]);
            }
        }
        self.senders.clear();
        for &n in chosen {
            let q = self.avals.iter().position(|&x| x == a[n]).unwrap_or(0);
            self.senders.push((n, q));
        }
        self.takes.clear();
    }

    /// Can spine `m` take `t` slots, `a_n * t` links from every chosen
    /// leaf at once (`spine_takes`)? `want` is `t * sum a_n`.
    pub fn spine_takes(&mut self, a: &[u32], m: usize, t: u32, want: u32) -> bool {
        let r = self.sets;
        while self.takes.len() < t as usize * r {
            let tt = (self.takes.len() / r) as u32 + 1;
            let start = self.takes.len();
            self.takes.resize(start + r, 0);
            for (n, &an) in a.iter().enumerate().filter(|(_, &an)| an > 0) {
                let cap = an * tt;
                let lco = &self.lco[n * r..(n + 1) * r];
                for (x, &c) in self.takes[start..].iter_mut().zip(lco) {
                    *x += cap.min(c);
                }
            }
        }
        let row = &self.takes[(t as usize - 1) * r..t as usize * r];
        let sci = &self.sci[m * r..(m + 1) * r];
        (0..r).all(|x| row[x] + sci[x] >= want)
    }

    /// Slots per spine are bounded by `tmax`: the suffix sums of level 2.
    pub fn set_tmax(&mut self, tmax: &[u32]) {
        let r = self.sets;
        let ns = tmax.len();
        let rows = (ns + 1) * r;
        self.tlater[ns * r..].fill(0);
        self.tfixed[..r].fill(0);
        self.send_later.clear();
        self.send_later.resize(self.avals.len() * rows, 0);
        self.send_fixed.clear();
        self.send_fixed.resize(self.avals.len() * rows, 0);
        for m in (0..ns).rev() {
            let cap = tmax[m] * self.l;
            let sci = &self.sci[m * r..(m + 1) * r];
            add_row(
                &mut self.tlater,
                r,
                (m + 1, m),
                sci.iter().map(|&c| cap.min(c)),
            );
            let tot = self.stot[m];
            for (q, &av) in self.avals.iter().enumerate() {
                let cap = av * tmax[m];
                let row = q * (ns + 1) + m;
                let terms = sci.iter().map(|&c| cap.min(tot - c));
                add_row(&mut self.send_later, r, (row + 1, row), terms);
            }
        }
    }

    /// Level 2 at spine `j`, `left` slots still to place: the relaxation
    /// `links_fit((nl, 0), (j, left), Some(tmax))`, then `leaves_send`
    /// for every distinct chosen leaf.
    pub fn spines_fit(&self, j: usize, left: u32) -> bool {
        let r = self.sets;
        let fixed = &self.fixed[self.full * r..(self.full + 1) * r];
        let (tf, tl) = (
            &self.tfixed[j * r..(j + 1) * r],
            &self.tlater[j * r..(j + 1) * r],
        );
        let want = self.l * self.s;
        let open = left * self.l;
        if !(0..r).all(|x| fixed[x] + tf[x] + open.min(tl[x]) >= want) {
            return false;
        }
        let rows = self.tlater.len();
        self.senders.iter().all(|&(n, q)| {
            let av = self.avals[q];
            let base = q * rows + j * r;
            let (sf, sl) = (
                &self.send_fixed[base..base + r],
                &self.send_later[base..base + r],
            );
            let lco = &self.lco[n * r..(n + 1) * r];
            let tot = self.ltot[n];
            let (open, want) = (av * left, av * self.s);
            (0..r).all(|x| tot - lco[x] + sf[x] + open.min(sl[x]) >= want)
        })
    }

    /// Spine `j` carries `v` slots: the sums of row `j + 1`.
    pub fn set_spine(&mut self, j: usize, v: u32) {
        let r = self.sets;
        let per_a = self.tlater.len() / r;
        let sci = &self.sci[j * r..(j + 1) * r];
        let cap = v * self.l;
        add_row(
            &mut self.tfixed,
            r,
            (j, j + 1),
            sci.iter().map(|&c| cap.min(c)),
        );
        let tot = self.stot[j];
        for (q, &av) in self.avals.iter().enumerate() {
            let cap = av * v;
            let row = q * per_a + j;
            let terms = sci.iter().map(|&c| cap.min(tot - c));
            add_row(&mut self.send_fixed, r, (row, row + 1), terms);
        }
    }
}

/// Row `to` of `buf` (rows `r` long) becomes row `from` plus `terms`.
fn add_row(
    buf: &mut [u32],
    r: usize,
    (from, to): (usize, usize),
    terms: impl Iterator<Item = u32>,
) {
    let (src, dst) = if from < to {
        let (head, tail) = buf.split_at_mut(to * r);
        (&head[from * r..(from + 1) * r], &mut tail[..r])
    } else {
        let (head, tail) = buf.split_at_mut(from * r);
        (&tail[..r], &mut head[to * r..(to + 1) * r])
    };
    for ((d, &s), t) in dst.iter_mut().zip(src).zip(terms) {
        *d = s + t;
    }
}

/// `out[A] = sum of caps[o] for o in A`, every subset `A` of the OCSes
/// (`out.len() == 2^caps.len()`), each from the one without its lowest OCS.
fn subset_sums(caps: &[u32], out: &mut [u32]) {
    out[0] = 0;
    for a in 1..out.len() {
        let low = a.trailing_zeros() as usize;
        out[a] = out[a & (a - 1)] + caps[low];
    }
}
