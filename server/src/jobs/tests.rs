//! tests
#![allow(clippy::unwrap_used)]

use super::*;
use crate::placement::placer;

fn cluster512() -> Arc<Topology> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../topologies/cluster512.yaml");
    Arc::new(crate::topology::load(std::path::Path::new(path)).unwrap())
}

/// Two-leaf vClos decisions (they configure leaves and spines).
fn decisions(topo: &Arc<Topology>, n: usize) -> Vec<Decision> {
    let mut p = placer(Policy::Vclos, Arc::clone(topo)).unwrap();
    (0..n)
        .map(|i| {
            let req = JobRequest::new(JobId::new(format!("j{i}")).unwrap(), 96);
            match p.place(&req).unwrap() {
                placement::Outcome::Placed(d) => (*d).clone(),
                b => panic!("{b:?}"),
            }
        })
        .collect()
}

/// The plans of a fabric that keeps its intents are those of the pure,
/// uncached planner, also after another writer changed the state (the
/// cache is keyed by the decisions, whatever changed them).
#[test]
fn kept_intents_plan_as_the_uncached_planner_does_after_any_state_change() {
    let topo = cluster512();
    let all = decisions(&topo, 3);
    let dir = tempfile::tempdir().unwrap();
    crate::state::store::init(dir.path(), &topo.name).unwrap();
    crate::state::store::save(dir.path(), &topo.name, &all[..1]).unwrap();
    let mut f = Fabric::load(Arc::clone(&topo), dir.path()).unwrap();
    let fresh = |held: &[Decision], action: Action| {
        plan::plan(&topo, held, &Running::new(), action).unwrap()
    };
    for round in 0..2 {
        let held = f.jobs();
        assert_eq!(f.intent().unwrap(), intent::build(&topo, &held).unwrap());
        let admit = f.plan_decision(all[2].clone()).unwrap();
        assert!(!admit.devices.is_empty());
        assert_eq!(
            json(&admit),
            json(&fresh(&held, Action::Admit(all[2].clone())))
        );
        let release = f.plan_release(&all[0].job).unwrap();
        assert!(!release.devices.is_empty());
        assert_eq!(
            json(&release),
            json(&fresh(&held, Action::Release(all[0].job.clone())))
        );
        // Another writer holds one job more; this fabric re-reads.
        if round == 0 {
            crate::state::store::save(dir.path(), &topo.name, &all[..2]).unwrap();
            block_on(f.refresh()).unwrap();
            assert_eq!(f.jobs().len(), 2);
        }
    }
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(f)
}

fn json(p: &Plan) -> String {
    serde_json::to_string(p).unwrap()
}
