//! Cassini's link compatibility ([`vclos::sharing::circle::fit`]): the
//! cost of scoring one shared link, the unit a sharing placer pays per
//! candidate link (issue 16 targets a decision p99 <= 2 ms with sharing).
//!
//! Run: `cargo bench --bench sharing`. Cases: 2 jobs of the generator's
//! default profile (exhaustive), 3 jobs of 40/60/255 ms (exhaustive on a
//! coarse circle), 6 jobs of mixed iterations (coordinate descent); then
//! what the placer's sharing mode pays per group of alike links (a
//! newcomer's 64 shifts against fixed jobs, `scores_joining`) and what the
//! network model pays per shared link it plays out in time
//! (`periodic::served`, fair and MLTCP division).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use vclos::sharing::circle::{fit, scores_joining, OnLink};
use vclos::sharing::periodic::{self, Division};
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

    let (a, b, new) = (
        Profile::up_down(250, 0.3),
        Profile::up_down(180, 0.2),
        Profile::up_down(250, 0.3),
    );
    let on = |profile| OnLink { profile, load: 1.0 };
    let fixed = [(on(&a), 0), (on(&b), 40)];
    let grid: Vec<u32> = (0..64).map(|i| i * 250 / 64).collect();
    c.bench_function("join 2 fixed jobs, 64 shifts", |bch| {
        bch.iter(|| black_box(scores_joining(&fixed, on(&new), 1.0, black_box(&grid))))
    });
    let link = |phase_ms| periodic::OnLink {
        phases: vec![(175, 0.0), (75, 1.0)],
        phase_ms,
    };
    let jobs = [link(0), link(10)];
    for (name, d) in [("fair", Division::Fair), ("mltcp", Division::Mltcp)] {
        c.bench_function(&format!("served 2 jobs 250 ms, {name}"), |bch| {
            bch.iter(|| black_box(periodic::served(black_box(&jobs), 1.0, d)))
        });
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
