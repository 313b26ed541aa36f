//! Many adds of one number, as fast as a table lookup and to the bit the
//! same as adding it one at a time.
//!
//! The routers count a job's flows on a link one add at a time (the runs
//! of [`super::routes`] are tested to the bit against one flow at a
//! time), and an all-to-all job of 256 GPUs has 63 000 flows of one rate:
//! those adds were most of its route. In floats `x + r + ... + r` (`n`
//! adds) is not `x + n r`, but it depends on nothing but `x`, `r` and
//! `n`: each add rounds the value before it. So where `x` is itself a sum
//! `0 + r + ... + r` of `k` adds, found in a table of those sums, the
//! answer is the table's entry `k + n`; elsewhere (a value that mixed
//! other numbers in) the adds are done one by one. Binary search finds
//! `x`: the sums of a positive `r` never decrease (IEEE 754 rounding is
//! monotonic), and where they stall any entry equal to `x` goes on the same
//! way.

/// Entries per table at most (sums of a rate `r` up to `4096 r`).
const ENTRIES: usize = 1 << 12;

/// Tables kept at most (a route adds one or two rates).
const RATES: usize = 4;

/// Below this many adds, adding is cheaper than a search.
const SHORT: u32 = 8;

/// The tables of sums `0 + r + ... + r`, by the bits of `r`, most recent
/// last.
#[derive(Debug, Clone, Default)]
pub struct Sums {
    tables: Vec<Table>,
}

/// The sums of one rate, and where recent values were found in them (a
/// run's count and charge look up the same value, and the next run goes
/// on from the value the last one left).
#[derive(Debug, Clone)]
struct Table {
    rate: u64,
    sums: Vec<f64>,
    seen: [(u64, u32); SEEN],
}

/// Recent lookups a table keeps (by the value's bits, direct-mapped).
const SEEN: usize = 16;

impl Table {
    fn slot(x: f64) -> usize {
        let b = x.to_bits();
        ((b ^ (b >> 17) ^ (b >> 35)) as usize) % SEEN
    }

    /// Where `x` is among the sums, if it is one.
    fn find(&mut self, x: f64) -> Option<usize> {
        let slot = &mut self.seen[Table::slot(x)];
        if slot.0 == x.to_bits() && self.sums.get(slot.1 as usize) == Some(&x) {
            return Some(slot.1 as usize);
        }
        let k = self.sums.partition_point(|&v| v < x);
        (self.sums.get(k) == Some(&x)).then(|| {
            *slot = (x.to_bits(), k as u32);
            k
        })
    }

    /// Remember that sum `k` is `self.sums[k]`.
    fn saw(&mut self, k: usize) {
        let x = self.sums[k];
        self.seen[Table::slot(x)] = (x.to_bits(), k as u32);
    }
}

impl Sums {
    /// `x` with `n` adds of `r`, as `for _ in 0..n { x += r }` gives it.
    pub fn add(&mut self, x: f64, r: f64, n: u32) -> f64 {
        match self.at(x, r, n) {
            Some((t, k)) => {
                t.saw(k + n as usize);
                t.sums[k + n as usize]
            }
            None => (0..n).fold(x, |x, _| x + r),
        }
    }

    /// How many of `most` adds of `r` to `x` keep `ok` of the running
    /// value, counting until the first that does not: `ok` must hold up
    /// to some value and fail above it (the sums only grow).
    pub fn count(&mut self, x: f64, r: f64, most: u32, ok: impl Fn(f64) -> bool) -> u32 {
        match self.at(x, r, most) {
            Some((t, k)) => t.sums[k + 1..=k + most as usize].partition_point(|&v| ok(v)) as u32,
            None => {
                let (mut now, mut n) = (x, 0);
                while n < most && ok(now + r) {
                    now += r;
                    n += 1;
                }
                n
            }
        }
    }

    /// The table of `r` and the index of `x` in it, when it holds `x` and
    /// `n` entries past it; `None` where adding one by one is the way.
    fn at(&mut self, x: f64, r: f64, n: u32) -> Option<(&mut Table, usize)> {
        if n < SHORT || !(r > 0.0 && r.is_finite()) || x.is_nan() {
            return None;
        }
        let t = self.table(r);
        while t.sums.len() < ENTRIES && t.sums[t.sums.len() - 1] < x {
            t.sums.push(t.sums[t.sums.len() - 1] + r);
        }
        let k = t.find(x)?;
        let want = k + n as usize + 1;
        if want > ENTRIES {
            return None;
        }
        while t.sums.len() < want {
            t.sums.push(t.sums[t.sums.len() - 1] + r);
        }
        Some((t, k))
    }

    /// `r`'s table, made (with its first entry, 0) if new.
    fn table(&mut self, r: f64) -> &mut Table {
        let rate = r.to_bits();
        let i = match self.tables.iter().position(|t| t.rate == rate) {
            Some(i) => i,
            None => {
                if self.tables.len() == RATES {
                    self.tables.remove(0);
                }
                self.tables.push(Table {
                    rate,
                    sums: vec![0.0],
                    seen: [(u64::MAX, 0); SEEN],
                });
                self.tables.len() - 1
            }
        };
        &mut self.tables[i]
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn one_by_one(x: f64, r: f64, n: u32) -> f64 {
        let mut v = x;
        for _ in 0..n {
            v += r;
        }
        v
    }

    /// To the bit what adding one at a time gives, from sums of the rate
    /// (table) and from other values (one by one), for awkward rates.
    #[test]
    fn sums_are_the_one_at_a_time_adds_to_the_bit() {
        let mut s = Sums::default();
        let mut rng = crate::placement::Rng(0x5ea5_0001);
        let mut from_table = 0;
        for _ in 0..4000 {
            let r = 1.0 / (1 + rng.below(500)) as f64;
            let k = rng.below(300) as u32;
            let x = match rng.below(3) {
                0 => one_by_one(0.0, r, k),
                1 => one_by_one(0.0, r, k) + 0.1,
                _ => rng.below(3) as f64,
            };
            let n = rng.below(600) as u32;
            from_table += u32::from(s.at(x, r, n).is_some());
            let want = one_by_one(x, r, n);
            assert_eq!(s.add(x, r, n).to_bits(), want.to_bits(), "{x} + {n} x {r}");
            let limit = 1.0 + 1e-9 - rng.below(2) as f64 * 0.3;
            let mut fit = 0;
            while fit < n && one_by_one(x, r, fit + 1) <= limit {
                fit += 1;
            }
            assert_eq!(
                s.count(x, r, n, |v| v <= limit),
                fit,
                "{x} + {n} x {r} <= {limit}"
            );
        }
        assert!(from_table > 1000, "{from_table} from the tables");
    }
}
