//! Spines with rearrangement: a measuring model for titan (issue 15,
//! docs/titan.md 6.5 B, 6.6 and 6.7).
//!
//! **Groups.** A job's cross-leaf flows are split by phase
//! ([`crate::network::traffic`]); within a phase, flows that may share a
//! link are put in one group: a flow at the full line rate is a group of
//! its own, flows at `1/per` of it (all-to-all) are packed `per` to a group
//! at both ends, greedily (a group whose ends both have room first, one
//! the job already holds at both ends before one at one end). A group
//! runs on one spine: up from its sending leaves, down into its receiving
//! leaves. Groups are split where they share no leaf end (each part may
//! take its own spine).
//!
//! **Links.** A link (a leaf's link up to a spine, or a spine's link down
//! to a leaf) is held by at most one job. Within a job, two groups of one
//! phase never share a link (that would put two full-rate flows on it),
//! while groups of different phases may (a job's phases never run at
//! once: the peak model of [`crate::network::peak`]). So every phase of
//! every job runs at full rate, whatever the others do.
//!
//! **Admission.** The new job's groups take spines one by one (busiest
//! phase first), each the spine whose links at its ends the job already
//! holds at the most ends (reuse across phases), then the spine busy at the
//! most links (best fit, keeping spines free everywhere for jobs that span
//! many leaves). Then, for each group left without a spine:
//!
//! 1. **Kőnig's alternating path** within the job's own phase (D. Kőnig,
//!    "Über Graphen und ihre Anwendung auf Determinantentheorie und
//!    Mengenlehre", Math. Ann. 77, 1916: a bipartite multigraph's edges
//!    colour with as many colours as its largest degree; the proof swaps
//!    two colours along an alternating path): a spine `s` closed to the
//!    group only by the job's own groups of that phase is freed by
//!    swapping them between `s` and another spine `t`, together with every
//!    group of the phase they meet on the other spine, transitively (the
//!    component of the path; groups may have several ends, so the
//!    component is checked, not assumed, not to come back to the group's
//!    ends on `s`). Only the new job's own groups move, and only onto
//!    links no other job holds.
//! 2. **Paull's step** (M. C. Paull, "Reswitching of connection networks",
//!    Bell Syst. Tech. J. 41, 1962): a spine whose links at the group's
//!    ends other jobs' groups hold (at most 4 of them, `MOST_BLOCKERS`),
//!    each moved to another spine open for it; every spine one level deep
//!    first, then two levels deep: a blocker with no open spine gets one by
//!    moving its own blockers in turn (never onto a spine being freed
//!    further up), at most `NESTED_BUDGET` spines tried per group.
//! 3. When that fails too, every held job is placed again from scratch
//!    with the new one among them (most group ends first), and the new
//!    state is taken if all fit.
//!
//! Moving a held group is a new leaf source route for a running job: a
//! three-stage Clos network allows it (rearrangeable networks: V. E.
//! Beneš, "Mathematical Theory of Connecting Networks and Telephone
//! Traffic", 1965), at the price of reordering that job's packets while it
//! happens.
//!
//! This is a model for measuring what titan could admit with rearrangement
//! (`examples/titan_bound.rs`), not a router: it assumes one link per
//! leaf-spine pair, and the replay's network model does not follow the
//! moves.

use std::collections::HashMap;

use crate::names::JobId;
use crate::network::peak::SLACK;
use crate::network::traffic::Traffic;
use crate::topology::{ServerId, Topology};
use crate::trace::Collective;

/// One group of a job's flows (module doc): its leaf ends and the phases
/// it runs in (bits, by the job's own phase numbering).
#[derive(Debug, Clone, Default, PartialEq)]
struct Group {
    up: Vec<usize>,
    down: Vec<usize>,
    phases: u64,
}

impl Group {
    /// The group's ends as link rows: `2 l` up from leaf `l`, `2 l + 1`
    /// down into it.
    fn ends(&self) -> impl Iterator<Item = usize> + '_ {
        let up = self.up.iter().map(|&l| 2 * l);
        up.chain(self.down.iter().map(|&l| 2 * l + 1))
    }
}

/// A held job: its groups and the spine of each.
#[derive(Debug, Clone)]
struct Held {
    groups: Vec<Group>,
    spine: Vec<u32>,
}

/// Who holds one link: a job's slot (`NONE`: free), the phases its groups
/// run there, and how many of its groups use it.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Link {
    slot: u32,
    phases: u64,
    groups: u16,
}

const NONE: u32 = u32::MAX;
const FREE: Link = Link {
    slot: NONE,
    phases: 0,
    groups: 0,
};

/// What the model did over a replay.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Moves {
    /// Jobs placed without moving anyone.
    pub direct: u64,
    /// Jobs placed by Paull's step.
    pub repaired: u64,
    /// Jobs placed by placing every job again.
    pub rearranged: u64,
    /// Held jobs moved in those.
    pub moved: u64,
    /// Jobs refused.
    pub refused: u64,
    /// Admissions (placed or not) in which the new job's own groups were
    /// swapped between two spines (Kőnig's alternating path).
    pub swapped: u64,
    /// Of the jobs placed by Paull's step, those whose step went two
    /// levels deep.
    pub deeper: u64,
}

/// The held jobs' groups and spines (module doc).
#[derive(Debug, Clone)]
pub struct SpineSets {
    spines: u32,
    /// Per link row (`2 l` up, `2 l + 1` down) and spine.
    links: Vec<Link>,
    /// Links held per spine.
    busy: Vec<u32>,
    slots: Vec<Option<Held>>,
    by_job: HashMap<JobId, u32>,
    pub moves: Moves,
}

impl SpineSets {
    /// The model of `topo` (one link per leaf-spine pair assumed); `None`
    /// without spines.
    pub fn new(topo: &Topology) -> Option<Self> {
        let spines = topo.spines.len() as u32;
        if spines == 0 {
            return None;
        }
        Some(SpineSets {
            spines,
            links: vec![FREE; 2 * topo.leaves.len() * spines as usize],
            busy: vec![0; spines as usize],
            slots: Vec::new(),
            by_job: HashMap::new(),
            moves: Moves::default(),
        })
    }

    fn at(&self, row: usize, s: u32) -> usize {
        row * self.spines as usize + s as usize
    }

    /// Spines whose links up from and down into leaf `l` are both free.
    pub fn free_at(&self, l: usize) -> u32 {
        (0..self.spines)
            .filter(|&s| {
                self.links[self.at(2 * l, s)].slot == NONE
                    && self.links[self.at(2 * l + 1, s)].slot == NONE
            })
            .count() as u32
    }

    /// Admit `job` on `gpus` (rank order) with collective `c`: `true` with
    /// it held (and maybe others moved), `false` with nothing changed.
    pub fn admit(
        &mut self,
        topo: &Topology,
        job: &JobId,
        gpus: &[(ServerId, u16)],
        c: Collective,
    ) -> bool {
        let groups = groups(topo, gpus, c, None);
        if groups.is_empty() {
            return true;
        }
        let slot = self.slots.len() as u32;
        self.slots.push(None);
        let mut h = Held {
            spine: vec![NONE; groups.len()],
            groups,
        };
        let left = self.place(slot, &mut h);
        #[cfg(test)]
        self.audit(Some((slot, &h)), "place");
        let before = left.len();
        let left = self.swap_own(slot, &mut h, left);
        #[cfg(test)]
        self.audit(Some((slot, &h)), "swap");
        if left.len() < before {
            self.moves.swapped += 1;
        }
        if left.is_empty() {
            return self.keep(job, slot, h, |m| m.direct += 1);
        }
        if let Some(moved) = self.repair(slot, &mut h, &left) {
            return self.keep(job, slot, h, |m| {
                m.repaired += 1;
                m.moved += moved;
            });
        }
        #[cfg(test)]
        self.audit(Some((slot, &h)), "repair failed");
        self.unplace_all(&h);
        #[cfg(test)]
        self.audit(None, "unplaced");
        if let Some(moved) = self.rearrange(slot, &h) {
            self.by_job.insert(job.clone(), slot);
            self.moves.rearranged += 1;
            self.moves.moved += moved;
            return true;
        }
        self.slots.pop();
        self.moves.refused += 1;
        false
    }

    /// Tests only: the link table is what the held jobs' groups (and
    /// `extra`, the job being admitted) say, at each step of an admission.
    #[cfg(test)]
    fn audit(&self, extra: Option<(u32, &Held)>, at: &str) {
        let mut want = vec![FREE; self.links.len()];
        let all = (self.slots.iter().enumerate())
            .filter_map(|(i, h)| Some((i as u32, h.as_ref()?)))
            .chain(extra);
        for (slot, h) in all {
            for (g, &s) in h.groups.iter().zip(&h.spine) {
                if s == NONE {
                    continue;
                }
                for row in g.ends() {
                    let k = &mut want[self.at(row, s)];
                    k.slot = slot;
                    k.phases |= g.phases;
                    k.groups += 1;
                }
            }
        }
        assert_eq!(want, self.links, "{at}");
    }

    fn keep(&mut self, job: &JobId, slot: u32, h: Held, count: impl FnOnce(&mut Moves)) -> bool {
        self.slots[slot as usize] = Some(h);
        self.by_job.insert(job.clone(), slot);
        count(&mut self.moves);
        true
    }

    /// Every link of `job` freed (nothing when it holds none).
    pub fn release(&mut self, job: &JobId) {
        let Some(slot) = self.by_job.remove(job) else {
            return;
        };
        if let Some(h) = self.slots[slot as usize].take() {
            self.unplace_all(&h);
        }
    }

    /// Whether group `g` of the job in `slot` may take spine `s`: every
    /// link at its ends free, or the job's own in other phases only.
    fn allowed(&self, slot: u32, g: &Group, s: u32) -> bool {
        g.ends().all(|row| {
            let k = self.links[self.at(row, s)];
            k.slot == NONE || (k.slot == slot && k.phases & g.phases == 0)
        })
    }

    /// The group's ends whose link to `s` the job already holds.
    fn reuse(&self, slot: u32, g: &Group, s: u32) -> usize {
        (g.ends())
            .filter(|&row| self.links[self.at(row, s)].slot == slot)
            .count()
    }

    /// The best allowed spine for group `g` (module doc), none of `not`.
    fn best(&self, slot: u32, g: &Group, not: &[u32]) -> Option<u32> {
        (0..self.spines)
            .filter(|&s| !not.contains(&s) && self.allowed(slot, g, s))
            .max_by_key(|&s| {
                (
                    self.reuse(slot, g, s),
                    self.busy[s as usize],
                    std::cmp::Reverse(s),
                )
            })
    }

    fn put(&mut self, slot: u32, g: &Group, s: u32) {
        for row in g.ends() {
            let i = self.at(row, s);
            let k = &mut self.links[i];
            if k.slot == NONE {
                self.busy[s as usize] += 1;
            }
            k.slot = slot;
            k.phases |= g.phases;
            k.groups += 1;
        }
    }

    /// Group `i` of `h` off its spine.
    fn take(&mut self, h: &Held, i: usize) {
        let (g, s) = (&h.groups[i], h.spine[i]);
        for row in g.ends() {
            let at = self.at(row, s);
            let k = &mut self.links[at];
            k.groups -= 1;
            if k.groups == 0 {
                *k = FREE;
                self.busy[s as usize] -= 1;
                continue;
            }
            // The phases of the job's other groups on this link.
            k.phases = (h.groups.iter().zip(&h.spine).enumerate())
                .filter(|&(j, (o, &t))| j != i && t == s && o.ends().any(|r| r == row))
                .fold(0, |a, (_, (o, _))| a | o.phases);
        }
    }

    /// Every placed group of `h` off its spine.
    fn unplace_all(&mut self, h: &Held) {
        for i in 0..h.groups.len() {
            if h.spine[i] != NONE {
                self.take(h, i);
            }
        }
    }

    /// `h`'s groups without a spine placed in order (busiest phase first,
    /// as [`groups`] lists them); the ones left without one.
    fn place(&mut self, slot: u32, h: &mut Held) -> Vec<usize> {
        let mut left = Vec::new();
        for i in 0..h.groups.len() {
            if h.spine[i] != NONE {
                continue;
            }
            match self.best(slot, &h.groups[i], &[]) {
                Some(s) => {
                    self.put(slot, &h.groups[i], s);
                    h.spine[i] = s;
                }
                None => left.push(i),
            }
        }
        left
    }

    /// Kőnig's alternating path within the job's own phase (module doc):
    /// for each group of `left`, a spine `s` closed to it only by the job's
    /// own groups of its phase, freed by swapping those groups, and every
    /// group of the phase they meet there, between `s` and another spine
    /// `t`. The groups still left; the swaps made stay (they move only the
    /// job's own groups, so [`SpineSets::unplace_all`] undoes them).
    fn swap_own(&mut self, slot: u32, h: &mut Held, left: Vec<usize>) -> Vec<usize> {
        let mut still = Vec::new();
        for i in left {
            let open: Vec<u32> = (0..self.spines)
                .filter(|&s| self.only_own(slot, &h.groups[i], s))
                .collect();
            let done = (open.into_iter())
                .any(|s| (0..self.spines).any(|t| t != s && self.swap_for(slot, h, i, s, t)));
            if !done {
                still.push(i);
            }
        }
        still
    }

    /// Whether spine `s` is closed to group `g` of the job in `slot` by
    /// that job's own groups of its phase alone.
    fn only_own(&self, slot: u32, g: &Group, s: u32) -> bool {
        let mut own = false;
        for row in g.ends() {
            let k = self.links[self.at(row, s)];
            if k.slot != NONE && k.slot != slot {
                return false;
            }
            own |= k.slot == slot && k.phases & g.phases != 0;
        }
        own
    }

    /// Group `i` of `h` (not placed) put on spine `s` by swapping the job's
    /// own groups of its phase between `s` and `t` (one alternating
    /// component, grown from the groups that close `s` to it): `true` with
    /// the group placed, `false` with nothing changed when another job
    /// holds a link the swap needs or the component would bring a group
    /// of the phase to one of `g`'s ends on `s`.
    fn swap_for(&mut self, slot: u32, h: &mut Held, i: usize, s: u32, t: u32) -> bool {
        let g = &h.groups[i];
        let same = |j: usize| j != i && h.groups[j].phases & g.phases != 0;
        let meets = |a: &Group, b: &Group| a.ends().any(|r| b.ends().any(|q| q == r));
        // The component: groups of the phase on `s` that meet `g`, then
        // every group of the phase on the other spine meeting one in it.
        let mut comp: Vec<usize> = (0..h.groups.len())
            .filter(|&j| same(j) && h.spine[j] == s && meets(&h.groups[j], g))
            .collect();
        let others = |row: usize, sp: u32| {
            let k = self.links[self.at(row, sp)];
            k.slot != NONE && k.slot != slot
        };
        // Those must move to `t`.
        if comp.is_empty()
            || comp
                .iter()
                .any(|&j| h.groups[j].ends().any(|r| others(r, t)))
        {
            return false;
        }
        let mut k = 0;
        while k < comp.len() {
            let (j, to) = (comp[k], if h.spine[comp[k]] == s { t } else { s });
            if to == s && meets(&h.groups[j], g) {
                return false;
            }
            for x in 0..h.groups.len() {
                if same(x)
                    && h.spine[x] == to
                    && !comp.contains(&x)
                    && meets(&h.groups[x], &h.groups[j])
                {
                    comp.push(x);
                }
            }
            k += 1;
        }
        let to: Vec<u32> = (comp.iter())
            .map(|&j| if h.spine[j] == s { t } else { s })
            .collect();
        // No other job may hold a link the component moves onto.
        let blocked = |(&j, &sp): (&usize, &u32)| h.groups[j].ends().any(|r| others(r, sp));
        if comp.iter().zip(&to).any(blocked) {
            return false;
        }
        for &j in &comp {
            self.take(h, j);
            h.spine[j] = NONE;
        }
        for (&j, &sp) in comp.iter().zip(&to) {
            self.put(slot, &h.groups[j], sp);
            h.spine[j] = sp;
        }
        // The component held every group of the phase at `g`'s ends on
        // `s`, and none of those it brought to `s` meets `g`.
        debug_assert!(self.allowed(slot, &h.groups[i], s));
        let g = h.groups[i].clone();
        self.put(slot, &g, s);
        h.spine[i] = s;
        true
    }

    /// Paull's step for each group in `left` (module doc); the held jobs
    /// moved, or `None` with every move undone (the job's placed groups
    /// stay placed).
    fn repair(&mut self, slot: u32, h: &mut Held, left: &[usize]) -> Option<u64> {
        let mut step = Step {
            log: Vec::new(),
            depth: 0,
            closed: Vec::new(),
            budget: 0,
            deeper: false,
        };
        for (n, &i) in left.iter().enumerate() {
            let g = h.groups[i].clone();
            // One level deep on every spine first, then two.
            step.budget = NESTED_BUDGET;
            let found = (0..2).find_map(|depth| {
                step.depth = depth;
                (0..self.spines).find(|&s| self.free_by_moving(slot, &g, s, &mut step))
            });
            let Some(s) = found else {
                // The groups placed here first: they sit where the moves
                // made room.
                for &j in &left[..n] {
                    self.take(h, j);
                    h.spine[j] = NONE;
                }
                for &(o, j, from) in step.log.iter().rev() {
                    self.shift(o, j, from);
                }
                return None;
            };
            self.put(slot, &g, s);
            h.spine[i] = s;
        }
        self.moves.deeper += u64::from(step.deeper);
        let mut moved: Vec<u32> = step.log.iter().map(|x| x.0).collect();
        moved.sort_unstable();
        moved.dedup();
        Some(moved.len() as u64)
    }

    /// Make spine `s` allowed for group `g` of the job in `slot` by moving
    /// the other jobs' groups on its links (at most [`MOST_BLOCKERS`]),
    /// each to a spine open for it or, `step.depth` levels deeper, one
    /// made open by moving its own blockers in turn (never onto `s` or a
    /// spine being freed further up); `true` when it is, with the moves in
    /// `step.log`; `false` with none made.
    fn free_by_moving(&mut self, slot: u32, g: &Group, s: u32, step: &mut Step) -> bool {
        let Some(blockers) = self.blockers(slot, g, s) else {
            return false;
        };
        let (mark, was) = (step.log.len(), step.deeper);
        step.closed.push(s);
        let mut ok = true;
        for &(o, j) in &blockers {
            let Some(og) = self.slots[o as usize].as_ref().map(|x| x.groups[j].clone()) else {
                ok = false;
                break;
            };
            let to = self.best(o, &og, &step.closed);
            let to = to.or_else(|| self.free_deeper(o, &og, step));
            let Some(to) = to else {
                ok = false;
                break;
            };
            step.log.push((o, j, s));
            self.shift(o, j, to);
        }
        step.closed.pop();
        if !ok {
            for &(o, j, from) in step.log[mark..].iter().rev() {
                self.shift(o, j, from);
            }
            step.log.truncate(mark);
            step.deeper = was;
        }
        ok
    }

    /// A spine for group `og` of the job in slot `o` made open by moving
    /// its blockers one level deeper (within `step`'s budget), or `None`
    /// with nothing moved.
    fn free_deeper(&mut self, o: u32, og: &Group, step: &mut Step) -> Option<u32> {
        if step.depth == 0 {
            return None;
        }
        step.depth -= 1;
        let mut found = None;
        for u in 0..self.spines {
            if step.budget == 0 {
                break;
            }
            if step.closed.contains(&u) {
                continue;
            }
            step.budget -= 1;
            if self.free_by_moving(o, og, u, step) {
                step.deeper = true;
                found = Some(u);
                break;
            }
        }
        step.depth += 1;
        found
    }

    /// The other jobs' groups on the links of spine `s` at group `g`'s
    /// ends (of the job in `slot`), or `None` when the job's own groups of
    /// `g`'s phase close it, or when there are more than
    /// [`MOST_BLOCKERS`].
    fn blockers(&self, slot: u32, g: &Group, s: u32) -> Option<Vec<(u32, usize)>> {
        let mut blockers: Vec<(u32, usize)> = Vec::new();
        for row in g.ends() {
            let k = self.links[self.at(row, s)];
            if k.slot == NONE {
                continue;
            }
            if k.slot == slot {
                if k.phases & g.phases != 0 {
                    return None;
                }
                continue;
            }
            let o = self.slots[k.slot as usize].as_ref()?;
            for (j, (og, &t)) in o.groups.iter().zip(&o.spine).enumerate() {
                if t == s && og.ends().any(|r| r == row) && !blockers.contains(&(k.slot, j)) {
                    blockers.push((k.slot, j));
                }
            }
        }
        (blockers.len() <= MOST_BLOCKERS).then_some(blockers)
    }

    /// Group `j` of the job in slot `o` to spine `to`.
    fn shift(&mut self, o: u32, j: usize, to: u32) {
        let Some(mut h) = self.slots[o as usize].take() else {
            return;
        };
        self.take(&h, j);
        let g = h.groups[j].clone();
        self.put(o, &g, to);
        h.spine[j] = to;
        self.slots[o as usize] = Some(h);
    }

    /// Every held job placed again from scratch with `new` (in `slot`)
    /// among them, most group ends first; taken when all fit (the held
    /// jobs moved), else `None` with nothing changed.
    fn rearrange(&mut self, slot: u32, new: &Held) -> Option<u64> {
        let mut order: Vec<(usize, u32)> = (self.slots.iter().enumerate())
            .filter_map(|(i, h)| {
                let h = if i as u32 == slot { new } else { h.as_ref()? };
                Some((
                    h.groups.iter().map(|g| g.up.len() + g.down.len()).sum(),
                    i as u32,
                ))
            })
            .collect();
        order.sort_by_key(|&(n, i)| (std::cmp::Reverse(n), i));
        let mut trial = SpineSets {
            spines: self.spines,
            links: vec![FREE; self.links.len()],
            busy: vec![0; self.spines as usize],
            slots: vec![None; self.slots.len()],
            by_job: HashMap::new(),
            moves: Moves::default(),
        };
        for &(_, i) in &order {
            let old = if i == slot {
                new
            } else {
                self.slots[i as usize].as_ref()?
            };
            let mut h = Held {
                groups: old.groups.clone(),
                spine: vec![NONE; old.groups.len()],
            };
            if !trial.place(i, &mut h).is_empty() {
                return None;
            }
            trial.slots[i as usize] = Some(h);
        }
        let moved = (self.slots.iter().zip(&trial.slots))
            .filter(|(a, b)| matches!((a, b), (Some(a), Some(b)) if a.spine != b.spine))
            .count() as u64;
        (self.links, self.busy, self.slots) = (trial.links, trial.busy, trial.slots);
        Some(moved)
    }
}

/// The most other jobs' groups [`SpineSets::repair`] moves to free one
/// spine for one group.
const MOST_BLOCKERS: usize = 4;

/// The most spines [`SpineSets::repair`] tries to free one level deeper,
/// per group of the new job.
const NESTED_BUDGET: u32 = 512;

/// Paull's steps in progress ([`SpineSets::repair`]): the moves made (job
/// slot, group, spine it left), how many levels deeper a step may still
/// go, the spines being freed further up (no move may land on them), the
/// spines the current group may still try one level deeper, and whether a
/// step went deeper.
struct Step {
    log: Vec<(u32, usize, u32)>,
    depth: u32,
    closed: Vec<u32>,
    budget: u32,
    deeper: bool,
}

/// One cross-leaf flow of a job: its leaves, its phase (bit), its rate
/// and its group (read by the tests, which check every link's load).
#[derive(Debug, Clone, Copy)]
#[cfg_attr(not(test), allow(dead_code))]
struct Routed {
    up: usize,
    down: usize,
    phase: u64,
    rate: f64,
    group: usize,
}

/// A job's groups (module doc), busiest phase first; its flows into
/// `flows` when given (the tests check the links' loads with them).
fn groups(
    topo: &Topology,
    gpus: &[(ServerId, u16)],
    c: Collective,
    mut flows: Option<&mut Vec<Routed>>,
) -> Vec<Group> {
    let servers: Vec<ServerId> = gpus.iter().map(|g| g.0).collect();
    let leaf = |i: u32| topo.server(servers[i as usize]).leaf.index();
    let t = Traffic::new(&servers);
    // Per phase: its rate and its cross-leaf (sender, receiver, flows).
    let mut phases: Vec<(u16, f64, Vec<Edge>)> = Vec::new();
    for b in t.blocks(c) {
        let (Some(&a), Some(&z)) = (b.src.first(), b.dst.first()) else {
            continue;
        };
        let (la, lz) = (leaf(a), leaf(z));
        if la == lz {
            continue;
        }
        let p = match phases.iter().position(|x| x.0 == b.share.phase) {
            Some(p) => p,
            None => {
                phases.push((b.share.phase, b.share.rate, Vec::new()));
                phases.len() - 1
            }
        };
        phases[p].2.push((la, lz, b.count()));
    }
    phases.sort_by_key(|p| std::cmp::Reverse(p.2.iter().map(|e| e.2).sum::<u32>()));
    let mut out = Vec::new();
    for (bit, &(_, rate, ref edges)) in phases.iter().enumerate() {
        let per = ((1.0 + SLACK) / rate).floor().max(1.0) as u32;
        let phase = 1u64 << bit.min(63);
        let packed = pack(edges, per);
        let (parts, of) = split(&packed, phase);
        let base = out.len();
        out.extend(parts);
        if let Some(flows) = flows.as_deref_mut() {
            flows.extend(packed.iter().zip(of).map(|(&(up, down, _), g)| Routed {
                up,
                down,
                phase,
                rate,
                group: base + g,
            }));
        }
    }
    out
}

/// Flows of one phase from one leaf to another: `(sender, receiver,
/// flows)`.
type Edge = (usize, usize, u32);

/// One phase's flows packed `per` to a group at each end (module doc):
/// `(sender, receiver, group)` per flow. Flow by flow, the group with room
/// at both ends that already has most of the two ends, lowest first, else
/// a new one. The flows of one edge are given in runs: the group chosen
/// for one then has both ends, and no other group with room had (it would
/// have been chosen), so it stays the choice until one of its ends is full
/// (the flow-by-flow reference is a test, to the group).
fn pack(edges: &[Edge], per: u32) -> Vec<(usize, usize, usize)> {
    // Flows per (leaf, up?, group), and each group's ends.
    let mut used: HashMap<(usize, bool, usize), u32> = HashMap::new();
    let mut ends: Vec<(Vec<usize>, Vec<usize>)> = Vec::new();
    let mut out = Vec::new();
    for &(la, lz, n) in edges {
        let mut left = n;
        while left > 0 {
            let on = |k: usize, up: bool| {
                let l = if up { la } else { lz };
                used.get(&(l, up, k)).copied().unwrap_or(0)
            };
            let held =
                |k: usize| u8::from(ends[k].0.contains(&la)) + u8::from(ends[k].1.contains(&lz));
            let k = (0..ends.len())
                .filter(|&k| on(k, true) < per && on(k, false) < per)
                .max_by_key(|&k| (held(k), std::cmp::Reverse(k)))
                .unwrap_or(ends.len());
            if k == ends.len() {
                ends.push((Vec::new(), Vec::new()));
            }
            let run = left.min(per - on(k, true)).min(per - on(k, false));
            if !ends[k].0.contains(&la) {
                ends[k].0.push(la);
            }
            if !ends[k].1.contains(&lz) {
                ends[k].1.push(lz);
            }
            *used.entry((la, true, k)).or_default() += run;
            *used.entry((lz, false, k)).or_default() += run;
            out.extend(std::iter::repeat_n((la, lz, k), run as usize));
            left -= run;
        }
    }
    out
}

/// Each group's flows split into parts that share no leaf end, as groups
/// of `phases`; and each flow's part.
fn split(flows: &[(usize, usize, usize)], phases: u64) -> (Vec<Group>, Vec<usize>) {
    type End = (usize, usize, bool);
    let mut index: HashMap<End, usize> = HashMap::new();
    let mut parent: Vec<usize> = Vec::new();
    fn root(p: &mut [usize], mut x: usize) -> usize {
        while p[x] != x {
            p[x] = p[p[x]];
            x = p[x];
        }
        x
    }
    let mut id = |e: End, parent: &mut Vec<usize>| {
        *index.entry(e).or_insert_with(|| {
            parent.push(parent.len());
            parent.len() - 1
        })
    };
    let mut first = Vec::with_capacity(flows.len());
    for &(a, z, k) in flows {
        let (x, y) = (
            id((k, a, true), &mut parent),
            id((k, z, false), &mut parent),
        );
        first.push(x);
        let (rx, ry) = (root(&mut parent, x), root(&mut parent, y));
        parent[rx] = ry;
    }
    let mut part: HashMap<usize, usize> = HashMap::new();
    let mut out: Vec<Group> = Vec::new();
    let mut of = Vec::with_capacity(flows.len());
    for (&(a, z, _), &x) in flows.iter().zip(&first) {
        let r = root(&mut parent, x);
        let i = *part.entry(r).or_insert_with(|| {
            out.push(Group {
                phases,
                ..Group::default()
            });
            out.len() - 1
        });
        of.push(i);
        let g = &mut out[i];
        if !g.up.contains(&a) {
            g.up.push(a);
        }
        if !g.down.contains(&z) {
            g.down.push(z);
        }
    }
    (out, of)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::sync::Arc;

    use super::*;
    use crate::placement::Rng;
    use crate::topology::generate::leaf_spine_topology;

    fn fabric(leaves: u32, servers: u32, t: u32, spines: u32) -> Arc<Topology> {
        leaf_spine_topology(leaves, servers, t, spines)
    }

    /// Some GPUs on 2 or more random servers (not checked against other
    /// jobs': the model is about links).
    fn some_job(t: &Topology, rng: &mut Rng) -> Vec<(ServerId, u16)> {
        let n = t.servers.len();
        let m = 2 + rng.below(n as u64 / 2) as usize;
        let mut servers: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            servers.swap(i, rng.below(i as u64 + 1) as usize);
        }
        let mut out = Vec::new();
        for &s in &servers[..m] {
            let g = 1 + rng.below(u64::from(t.gpus_per_server)) as u16;
            out.extend((0..g).map(|k| (ServerId(s as u32), k)));
        }
        out
    }

    /// Recomputed from the held jobs' flows: every link's peaks added up
    /// over jobs (a job's peak on a link: the most its flows on it carry
    /// in any one phase) stay within the line rate, one job per link, and
    /// the link table is what the groups say.
    /// The held jobs' GPUs and collectives.
    type Jobs = HashMap<JobId, (Vec<(ServerId, u16)>, Collective)>;

    fn check(sets: &SpineSets, topo: &Topology, held: &Jobs) {
        let mut peak: HashMap<(usize, u32), f64> = HashMap::new();
        let mut holder: HashMap<(usize, u32), u32> = HashMap::new();
        for (job, (gpus, c)) in held {
            let mut flows = Vec::new();
            let groups = groups(topo, gpus, *c, Some(&mut flows));
            let Some(&slot) = sets.by_job.get(job) else {
                assert!(groups.is_empty(), "{job} held with no groups");
                continue;
            };
            let h = sets.slots[slot as usize].as_ref().unwrap();
            assert_eq!(groups, h.groups);
            let mut phase_load: HashMap<(usize, u32, u64), f64> = HashMap::new();
            for f in &flows {
                let s = h.spine[f.group];
                assert_ne!(s, NONE);
                for row in [2 * f.up, 2 * f.down + 1] {
                    *phase_load.entry((row, s, f.phase)).or_default() += f.rate;
                    let who = *holder.entry((row, s)).or_insert(slot);
                    assert_eq!(who, slot, "link {row}/{s} held by two jobs");
                    assert_eq!(sets.links[sets.at(row, s)].slot, slot);
                }
            }
            let mut job_peak: HashMap<(usize, u32), f64> = HashMap::new();
            for ((row, s, _), x) in phase_load {
                let e = job_peak.entry((row, s)).or_default();
                *e = e.max(x);
            }
            for (k, x) in job_peak {
                *peak.entry(k).or_default() += x;
            }
        }
        for (&(row, s), &x) in &peak {
            assert!(x <= 1.0 + SLACK, "link {row}/{s} at {x}");
        }
        let held_links = sets.links.iter().filter(|k| k.slot != NONE).count();
        assert_eq!(held_links, holder.len(), "links held by no flow");
        assert_eq!(sets.busy.iter().sum::<u32>() as usize, held_links);
    }

    #[test]
    fn every_phase_of_every_held_job_fits_its_links_through_moves_and_releases() {
        let mut rng = Rng(0x5e75_0001);
        let mut total = Moves::default();
        for topo in [
            fabric(6, 4, 4, 16),
            fabric(8, 2, 8, 16),
            fabric(4, 4, 8, 32),
        ] {
            let mut sets = SpineSets::new(&topo).unwrap();
            let mut held: Jobs = HashMap::new();
            for step in 0..300 {
                if !held.is_empty() && rng.below(3) == 0 {
                    let mut jobs: Vec<&JobId> = held.keys().collect();
                    jobs.sort();
                    let j = jobs[rng.below(jobs.len() as u64) as usize].clone();
                    sets.release(&j);
                    held.remove(&j);
                } else {
                    let job = JobId::new(format!("j{step}")).unwrap();
                    let gpus = some_job(&topo, &mut rng);
                    let c = Collective::ALL[rng.below(3) as usize];
                    let before = sets.links.clone();
                    if sets.admit(&topo, &job, &gpus, c) {
                        held.insert(job, (gpus, c));
                    } else {
                        assert_eq!(before, sets.links, "a refusal changed the links");
                    }
                }
                check(&sets, &topo, &held);
            }
            for j in held.keys() {
                sets.release(j);
            }
            assert!(sets.links.iter().all(|k| *k == FREE), "links left held");
            assert!(sets.busy.iter().all(|&b| b == 0));
            let m = sets.moves;
            total.direct += m.direct;
            total.repaired += m.repaired;
            total.rearranged += m.rearranged;
            total.refused += m.refused;
            total.swapped += m.swapped;
            total.deeper += m.deeper;
        }
        // Every admission path ran (and was checked) above.
        assert!(
            total.direct > 50
                && total.repaired > 5
                && total.rearranged > 0
                && total.refused > 5
                && total.swapped > 5
                && total.deeper > 0,
            "{total:?}"
        );
    }

    /// [`pack`] one flow at a time, as the module doc states it.
    fn pack_one_by_one(edges: &[Edge], per: u32) -> Vec<(usize, usize, usize)> {
        // Flows per (leaf, up?, group), and each group's ends.
        let mut used: HashMap<(usize, bool, usize), u32> = HashMap::new();
        let mut ends: Vec<(Vec<usize>, Vec<usize>)> = Vec::new();
        let mut out = Vec::new();
        for &(la, lz, n) in edges {
            for _ in 0..n {
                let room = |k: usize| {
                    used.get(&(la, true, k)).copied().unwrap_or(0) < per
                        && used.get(&(lz, false, k)).copied().unwrap_or(0) < per
                };
                let held = |k: usize| {
                    u8::from(ends[k].0.contains(&la)) + u8::from(ends[k].1.contains(&lz))
                };
                let k = (0..ends.len())
                    .filter(|&k| room(k))
                    .max_by_key(|&k| (held(k), std::cmp::Reverse(k)))
                    .unwrap_or(ends.len());
                if k == ends.len() {
                    ends.push((Vec::new(), Vec::new()));
                }
                if !ends[k].0.contains(&la) {
                    ends[k].0.push(la);
                }
                if !ends[k].1.contains(&lz) {
                    ends[k].1.push(lz);
                }
                *used.entry((la, true, k)).or_default() += 1;
                *used.entry((lz, false, k)).or_default() += 1;
                out.push((la, lz, k));
            }
        }
        out
    }

    #[test]
    fn packing_in_runs_makes_the_flow_by_flow_groups() {
        let mut rng = Rng(0x5e75_0003);
        for _ in 0..300 {
            let leaves = 2 + rng.below(6) as usize;
            let per = 1 + rng.below(20) as u32;
            let edges: Vec<Edge> = (0..1 + rng.below(12))
                .map(|_| {
                    let a = rng.below(leaves as u64) as usize;
                    let z = (a + 1 + rng.below(leaves as u64 - 1) as usize) % leaves;
                    (a, z, 1 + rng.below(40) as u32)
                })
                .collect();
            assert_eq!(
                pack(&edges, per),
                pack_one_by_one(&edges, per),
                "{edges:?} per {per}"
            );
        }
    }

    #[test]
    fn groups_hold_at_most_a_line_rate_at_each_end() {
        let mut rng = Rng(0x5e75_0002);
        let topo = fabric(6, 4, 4, 16);
        for _ in 0..200 {
            let gpus = some_job(&topo, &mut rng);
            let c = Collective::ALL[rng.below(3) as usize];
            let mut flows = Vec::new();
            let groups = groups(&topo, &gpus, c, Some(&mut flows));
            let mut at_end: HashMap<(usize, usize), f64> = HashMap::new();
            for f in &flows {
                assert_ne!(f.up, f.down, "a flow under one leaf");
                let g = &groups[f.group];
                assert!(g.up.contains(&f.up) && g.down.contains(&f.down));
                *at_end.entry((f.group, 2 * f.up)).or_default() += f.rate;
                *at_end.entry((f.group, 2 * f.down + 1)).or_default() += f.rate;
            }
            assert!(at_end.values().all(|&x| x <= 1.0 + SLACK));
            // Every group carries a flow.
            for (i, g) in groups.iter().enumerate() {
                assert!(!g.up.is_empty() && !g.down.is_empty());
                assert!(flows.iter().any(|f| f.group == i));
            }
        }
    }
}
