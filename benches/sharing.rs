//! Cassini's link compatibility ([`vclos::sharing::circle::fit`]): the
//! cost of scoring one shared link, the unit a sharing placer pays per
//! candidate link (issue 16 targets a decision p99 <= 2 ms with sharing).
//!
//! Run: `cargo bench --bench sharing`. Cases: 2 jobs of the generator's
//! default profile (exhaustive), 3 jobs of 40/60/255 ms (exhaustive on a
//! coarse circle), 6 jobs of mixed iterations (coordinate descent).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use vclos::sharing::circle::{fit, OnLink};
use vclos::sharing::profile::Profile;

fn case(c: &mut Criterion, name: &str, profiles: &[Profile]) {
    let jobs = OnLink::at_full_load(profiles);
    c.bench_function(name, |b| b.iter(|| black_box(fit(black_box(&jobs), 1.0))));
}

fn bench(c: &mut Criterion) {
    case(
        c,
        "fit 2 jobs 250 ms",
        &[Profile::up_down(250, 0.3), Profile::up_down(250, 0.4)],
    );
    case(
        c,
        "fit 3 jobs 40/60/255 ms",
        &[
            Profile::up_down(40, 0.25),
            Profile::up_down(60, 0.2),
            Profile::up_down(255, 0.45),
        ],
    );
    let six: Vec<Profile> = [120, 180, 240, 250, 255, 300]
        .iter()
        .zip([0.1, 0.15, 0.2, 0.1, 0.15, 0.2])
        .map(|(&i, c)| Profile::up_down(i, c))
        .collect();
    case(c, "fit 6 jobs mixed", &six);
}

criterion_group!(benches, bench);
criterion_main!(benches);
