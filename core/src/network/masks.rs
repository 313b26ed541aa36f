//! Which paths one more flow fits, read from bit masks instead of tested
//! path by path, for [`super::peak`]'s first-fit searches.
//!
//! A leaf pair's paths are, on a leaf-spine fabric with one link per leaf
//! and spine, uplink `i` up from one leaf and uplink `i` down into the
//! other (path `i`). Each leaf has two *sides*, its links up (`2 l`) and
//! down (`2 l + 1`), and here each side keeps one bit per uplink: whether
//! one more flow of the masks' rate fits that link in a phase, strictly
//! or lent, by [`super::peak::Peaks`]'s own test of the link (the same
//! float expression, computed when something it reads changes). A path
//! fits where its two links do ([`super::peak`]'s test is per link), so
//! the first fitting path from `from` is the first set bit of the AND of
//! two words, and the lent search visits only the paths that fit: the same
//! answers as the scan, without it. An all-to-all job's flows are small,
//! so many fit on one path, and the strict scan of every one of its runs
//! went past the full links first: 45 000-78 000 link tests for one route
//! of a 250-GPU job at load 0.9.
//!
//! **What is kept, and when.** With no job being routed, a link's bits are
//! the same in every phase (the job has no rate anywhere): one *base* word
//! per side, updated when a link's held peaks change (a job admitted or
//! released) and, for the lent bits, when the lendable links change. While
//! a job is routed, a side it has charged is *dirty*: it has its own bits
//! per phase, updated link by link as the job's rates grow (only the
//! phases the route uses, and the lent bits only when the route may
//! lend), and reset to the base when the route ends. Searches for another
//! rate, another phase or lent bits not kept scan instead.

/// Phases per side (as [`super::peak::PHASES`]).
const PHASES: usize = super::peak::PHASES;

/// Per side and phase, whether one more flow of [`Masks::rate`] fits
/// each link (module doc).
#[derive(Debug, Clone)]
pub struct Masks {
    rate: f64,
    /// The phase slots kept while a job is routed (bit per slot), and
    /// whether the lent bits are.
    phases: u32,
    lent: bool,
    /// Per link: (side, bit).
    at: Vec<(u32, u32)>,
    /// Words per side.
    words: usize,
    /// Per side, strict and lent: the bits with no job routed.
    base: [Vec<u64>; 2],
    /// Per (side, phase), strict and lent: the bits of a dirty side.
    now: [Vec<u64>; 2],
    /// Per side: whether `now` holds its bits; the dirty sides.
    dirty: Vec<bool>,
    dirty_sides: Vec<usize>,
    /// Per side: the rate its base bits are for (its bits are made when
    /// a route over it needs them), and its links.
    made_for: Vec<u64>,
    links_of: Vec<Vec<u32>>,
}

impl Masks {
    /// Link `l` is bit `at[l].1` of side `at[l].0`; no rate yet (every
    /// search scans until [`Masks::set_rate`]).
    pub fn new(at: Vec<(u32, u32)>) -> Self {
        let sides = at.iter().map(|&(s, _)| s as usize + 1).max().unwrap_or(0);
        let words = at
            .iter()
            .map(|&(_, b)| b as usize / 64 + 1)
            .max()
            .unwrap_or(0);
        let mut links_of = vec![Vec::new(); sides];
        for (l, &(side, _)) in at.iter().enumerate() {
            links_of[side as usize].push(l as u32);
        }
        Masks {
            rate: f64::NAN,
            phases: 0,
            lent: false,
            at,
            words,
            base: [vec![0; sides * words], vec![0; sides * words]],
            now: [
                vec![0; sides * PHASES * words],
                vec![0; sides * PHASES * words],
            ],
            dirty: vec![false; sides],
            dirty_sides: Vec::new(),
            made_for: vec![f64::NAN.to_bits(); sides],
            links_of,
        }
    }

    /// The rate of the last route (the bits' rate on its sides).
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// Whether a search for `rate` in phase slot `ph`, strict or `lent`,
    /// over `sides` may read the masks.
    pub fn keeps(&self, rate: f64, ph: usize, lent: bool, sides: &[u32]) -> bool {
        let bits = rate.to_bits();
        self.rate.to_bits() == bits
            && self.phases & (1 << ph) != 0
            && (!lent || self.lent)
            && sides
                .iter()
                .all(|&s| self.made_for.get(s as usize) == Some(&bits))
    }

    /// For a route over `sides`, with no job routed: the rate and phase
    /// slots it uses and whether it may lend. A side whose bits are for
    /// another rate has them made from `fits(l, lent)`.
    pub fn set_rate(
        &mut self,
        rate: f64,
        phases: u32,
        lent: bool,
        sides: &[usize],
        fits: impl Fn(usize, bool) -> bool,
    ) {
        (self.rate, self.phases, self.lent) = (rate, phases, lent);
        for &side in sides {
            if side >= self.made_for.len() || self.made_for[side] == rate.to_bits() {
                continue;
            }
            self.made_for[side] = rate.to_bits();
            for i in 0..self.links_of[side].len() {
                let l = self.links_of[side][i] as usize;
                self.set_base(l, fits(l, false), fits(l, true));
            }
        }
    }

    /// Link `l`'s base bits (its bits with no job routed).
    pub fn set_base(&mut self, l: usize, strict: bool, lent: bool) {
        let (side, bit) = self.at[l];
        if self.made_for[side as usize] != self.rate.to_bits() {
            // Bits for another rate are stale now: made again when needed.
            self.made_for[side as usize] = f64::NAN.to_bits();
            return;
        }
        let w = side as usize * self.words;
        set(&mut self.base[0], w, bit, strict);
        set(&mut self.base[1], w, bit, lent);
    }

    /// The lent base bits: the strict ones, but `free` on the links of
    /// `lendable` (`None`: every link).
    pub fn lend(&mut self, lendable: Option<&[usize]>, free: bool) {
        let [strict, lent] = &mut self.base;
        match lendable {
            None => lent.fill(if free { !0 } else { 0 }),
            Some(ids) => {
                lent.clone_from(strict);
                for &l in ids {
                    let (side, bit) = self.at[l];
                    set(lent, side as usize * self.words, bit, free);
                }
            }
        }
    }

    /// The job's rates on link `l` changed (in slot `ph`, and on every
    /// slot when `peak` rose): its bits again from `fits(ph, lent)`.
    pub fn charged(&mut self, l: usize, ph: usize, peak: bool, fits: impl Fn(usize, bool) -> bool) {
        let (side, bit) = self.at[l];
        let side = side as usize;
        if !self.dirty[side] {
            self.dirty[side] = true;
            self.dirty_sides.push(side);
            let w = self.words;
            for k in 0..2 {
                for p in 0..PHASES {
                    let at = (side * PHASES + p) * w;
                    self.now[k][at..at + w]
                        .copy_from_slice(&self.base[k][side * w..(side + 1) * w]);
                }
            }
        }
        let slots = if peak {
            self.phases
        } else {
            self.phases & (1 << ph)
        };
        for p in (0..PHASES).filter(|&p| slots & (1 << p) != 0) {
            let at = (side * PHASES + p) * self.words;
            set(&mut self.now[0], at, bit, fits(p, false));
            if self.lent {
                set(&mut self.now[1], at, bit, fits(p, true));
            }
        }
    }

    /// The route ended: every side back to its base bits.
    pub fn clean(&mut self) {
        for side in self.dirty_sides.drain(..) {
            self.dirty[side] = false;
        }
    }

    /// Word `w` of the paths over `sides` (a path's links in order, one
    /// side each) that one more flow in slot `ph` fits.
    fn word(&self, sides: &[u32], ph: usize, w: usize, lent: bool) -> u64 {
        let k = usize::from(lent);
        sides.iter().fold(!0u64, |m, &side| {
            let side = side as usize;
            m & if self.dirty[side] {
                self.now[k][(side * PHASES + ph) * self.words + w]
            } else {
                self.base[k][side * self.words + w]
            }
        })
    }

    /// The paths `from..n` over `sides` that one more flow in slot `ph`
    /// fits, in order, to `f` until it answers `true` ([`Masks::keeps`]
    /// must hold).
    pub fn each(
        &self,
        sides: &[u32],
        ph: usize,
        lent: bool,
        from: usize,
        n: usize,
        mut f: impl FnMut(usize) -> bool,
    ) {
        for w in from / 64..n.div_ceil(64).min(self.words) {
            let mut m = self.word(sides, ph, w, lent);
            if w == from / 64 {
                m &= !0u64 << (from % 64);
            }
            while m != 0 {
                let i = w * 64 + m.trailing_zeros() as usize;
                if i >= n || f(i) {
                    return;
                }
                m &= m - 1;
            }
        }
    }
}

fn set(words: &mut [u64], w: usize, bit: u32, on: bool) {
    let (i, b) = (w + bit as usize / 64, 1u64 << (bit % 64));
    if on {
        words[i] |= b;
    } else {
        words[i] &= !b;
    }
}
