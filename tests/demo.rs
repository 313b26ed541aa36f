//! `vclos demo`, the README's first command, runs the whole cycle on the
//! emulated fabric and passes only if every verification did.

use std::process::Command;

#[test]
fn demo_runs_the_whole_cycle_and_restores_every_device() {
    let out = Command::new(env!("CARGO_BIN_EXE_vclos"))
        .args(["demo", "--switch-delay-ms", "0"])
        .output()
        .expect("run vclos demo");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Both kinds of isolated slice were built, and OCS ports were rewired.
    assert!(text.contains("decision: stage vclos"), "{text}");
    assert!(
        text.contains("decision: stage ocs-") && text.contains("OCS cross-connects ocs1:"),
        "{text}"
    );
    assert!(
        text.contains("Vrf-e-1"),
        "spine VRFs appear in the diff: {text}"
    );
    assert_eq!(
        text.matches("verification from device state: OK").count(),
        12,
        "{text}"
    );
    assert!(
        text.contains("every device is back to its starting configuration"),
        "{text}"
    );
    assert!(text.trim_end().ends_with("demo passed"), "{text}");
}
