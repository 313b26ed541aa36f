//! The emulated OCS model in memory: symmetric table, switching delay on a
//! paused tokio clock, idle-links-only refusals.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use vclos::emulator::busy::{NeverBusy, StaticBusy};
use vclos::emulator::ocs::{Change, LinkState, OcsError, OcsModel, DEFAULT_SWITCHING_DELAY};
use vclos::topology::{self, DeviceId, Ocs, OcsId};

const O: OcsId = OcsId(0);

/// Eight ports "1".."8"; patches 1~5 and 2~6 (indices 0~4, 1~5).
fn ocs8() -> Ocs {
    Ocs {
        name: "ocs1".into(),
        device: DeviceId(0),
        ports: (1..=8).map(|i| i.to_string().into()).collect(),
        port_peer: vec![None; 8],
        patches: vec![(0, 4), (1, 5)],
    }
}

fn model(busy: Arc<StaticBusy>) -> OcsModel {
    OcsModel::new(O, &ocs8(), busy)
}

#[tokio::test(start_paused = true)]
async fn table_is_symmetric_and_a_matching() {
    let m = model(Arc::default());
    assert_eq!(m.patches(), vec![(0, 4), (1, 5)]);
    m.connect(6, 2).await.unwrap();
    assert_eq!((m.partner(2), m.partner(6)), (Some(6), Some(2)));
    assert_eq!(m.patches(), vec![(0, 4), (1, 5), (2, 6)]);

    assert!(matches!(
        m.connect(3, 3).await,
        Err(OcsError::SelfPatch { .. })
    ));
    let e = m.connect(3, 0).await.unwrap_err();
    assert_eq!(
        e,
        OcsError::AlreadyPatched {
            device: "ocs1".into(),
            port: "1".into(),
            partner: "5".into()
        }
    );
    assert!(matches!(
        m.connect(3, 8).await,
        Err(OcsError::NoSuchPort { .. })
    ));
    assert!(matches!(
        m.apply(Change::Connect {
            pairs: vec![(3, 7), (7, 2)],
            replace: true
        })
        .await,
        Err(OcsError::Repeated { .. })
    ));

    m.disconnect(6).await.unwrap();
    assert_eq!((m.partner(2), m.partner(6)), (None, None));
    assert!(matches!(
        m.disconnect(6).await,
        Err(OcsError::NotPatched { .. })
    ));
    assert_eq!(
        m.patches(),
        vec![(0, 4), (1, 5)],
        "failed changes left the table alone"
    );

    m.disconnect_all().await.unwrap();
    assert!(m.patches().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_change_is_dark_for_the_switching_delay() {
    let m = model(Arc::default());
    assert_eq!(m.switching_delay(), DEFAULT_SWITCHING_DELAY);
    assert_eq!(m.link_state(0).unwrap(), LinkState::Lit { peer: 4 });

    let t0 = Instant::now();
    let done = m
        .start(Change::Connect {
            pairs: vec![(2, 3)],
            replace: false,
        })
        .unwrap();
    assert_eq!(done - t0, Duration::from_millis(50));
    assert_eq!(
        m.link_state(2).unwrap(),
        LinkState::Switching { peer: Some(3) }
    );
    assert_eq!(m.partner(2), Some(3), "the table has the patch at once");
    tokio::time::advance(Duration::from_millis(49)).await;
    assert!(!m.link_state(3).unwrap().is_lit(), "still dark at 49 ms");
    assert!(matches!(
        m.disconnect(2).await,
        Err(OcsError::Switching { .. })
    ));
    tokio::time::advance(Duration::from_millis(1)).await;
    assert_eq!(m.link_state(3).unwrap(), LinkState::Lit { peer: 2 });

    // A disconnection takes effect at once: the light stops, nothing settles.
    let t1 = Instant::now();
    m.disconnect(0).await.unwrap();
    assert_eq!(t1.elapsed(), Duration::ZERO);
    assert_eq!(m.link_state(0).unwrap(), LinkState::Unpatched);
    assert_eq!(m.link_state(4).unwrap(), LinkState::Unpatched);

    // Untouched ports never went dark.
    assert_eq!(m.link_state(1).unwrap(), LinkState::Lit { peer: 5 });
}

#[tokio::test(start_paused = true)]
async fn replace_connect_darkens_old_partners() {
    let m = model(Arc::default());
    m.start(Change::Connect {
        pairs: vec![(0, 1)],
        replace: true,
    })
    .unwrap();
    // 0~4 and 1~5 were broken up: 4 and 5 are dark (and free) at once,
    // while the new 0~1 is dark until it has switched.
    assert_eq!(m.patches(), vec![(0, 1)]);
    assert_eq!(m.link_state(4).unwrap(), LinkState::Unpatched);
    assert_eq!(
        m.link_state(1).unwrap(),
        LinkState::Switching { peer: Some(0) }
    );
    tokio::time::advance(DEFAULT_SWITCHING_DELAY).await;
    assert_eq!(m.link_state(1).unwrap(), LinkState::Lit { peer: 0 });
}

#[tokio::test(start_paused = true)]
async fn busy_links_refuse_disconnect_at_either_end() {
    let busy = Arc::new(StaticBusy::new());
    let m = model(busy.clone());
    busy.set_busy(O, 4, true); // the far end of patch 1~5
    for p in [0, 4] {
        let e = m.disconnect(p).await.unwrap_err();
        assert!(
            matches!(e, OcsError::Busy { ref port, .. } if port == "5"),
            "{e}"
        );
    }
    assert!(matches!(
        m.disconnect_all().await,
        Err(OcsError::Busy { .. })
    ));
    assert!(matches!(
        m.apply(Change::Disconnect(vec![1, 0])).await,
        Err(OcsError::Busy { .. })
    ));
    assert_eq!(m.patches(), vec![(0, 4), (1, 5)], "nothing moved");
    m.disconnect(1).await.unwrap();
    busy.set_busy(O, 4, false);
    m.disconnect(0).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn busy_links_refuse_connect_that_would_move_them() {
    let busy = Arc::new(StaticBusy::new());
    let m = model(busy.clone());
    // Test traffic over 1~5: rewiring port 1 (index 0) elsewhere is a move.
    let flow = busy.traffic(O, 0);
    let e = m
        .apply(Change::Connect {
            pairs: vec![(4, 2)],
            replace: true,
        })
        .await
        .unwrap_err();
    assert!(
        matches!(e, OcsError::Busy { ref port, .. } if port == "1"),
        "{e}"
    );
    // A strict connect on the busy port says busy, not merely "patched".
    assert!(matches!(m.connect(0, 2).await, Err(OcsError::Busy { .. })));
    // Unpatched idle ports connect freely while traffic flows elsewhere.
    m.connect(2, 3).await.unwrap();
    drop(flow);
    m.apply(Change::Connect {
        pairs: vec![(4, 6)],
        replace: true,
    })
    .await
    .unwrap();
    assert_eq!(m.patches(), vec![(1, 5), (2, 3), (4, 6)]);
}

#[tokio::test(start_paused = true)]
async fn unpatched_busy_port_may_be_connected() {
    // Moving a link means breaking one that exists; lighting a dark port
    // moves nothing (documented rule).
    let busy = Arc::new(StaticBusy::new());
    let m = model(busy.clone());
    busy.set_busy(O, 2, true);
    m.connect(2, 3).await.unwrap();
    assert!(matches!(m.disconnect(3).await, Err(OcsError::Busy { .. })));
}

#[tokio::test(start_paused = true)]
async fn built_from_the_testbed_topology() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/topologies/testbed-ocs.yaml"
    ))
    .unwrap();
    let topo = topology::from_str("testbed-ocs.yaml", &text).unwrap();
    let id = topo.ocs_id("ocs1").unwrap();
    let m = OcsModel::from_topology(&topo, id, Arc::new(NeverBusy))
        .unwrap()
        .with_switching_delay(Duration::from_millis(200));
    assert_eq!(m.port_count(), 64);
    assert_eq!(m.patches().len(), 32);
    let p1 = m.port_index("1").unwrap();
    assert_eq!(
        m.partner(p1).map(|q| m.port_name(q)),
        Some("33".to_string())
    );
    m.disconnect(p1).await.unwrap();
    let t = Instant::now();
    let p33 = m.port_index("33").unwrap();
    m.connect(p1, p33).await.unwrap();
    assert_eq!(
        t.elapsed(),
        Duration::from_millis(200),
        "the configured delay applies"
    );
}
