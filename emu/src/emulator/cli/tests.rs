#![allow(clippy::unwrap_used)]

use super::*;

fn device() -> Arc<SwitchDevice> {
    SwitchDevice::new("LEAF1", VrpConfig::new("LEAF1"), Arc::new(Faults::new()))
}

/// Type lines, asserting none prints an error; return the last output.
fn run(s: &mut CliSession, lines: &[&str]) -> String {
    let mut last = String::new();
    for l in lines {
        let r = s.handle_line(l);
        assert!(!r.output.contains("Error"), "{l:?} -> {}", r.output);
        last = r.output;
    }
    last
}

#[test]
fn prompts_follow_views_and_candidate_state() {
    let dev = device();
    let mut s = CliSession::new(dev, "admin");
    assert_eq!(s.prompt(), "<LEAF1>");
    run(&mut s, &["system-view"]);
    assert_eq!(s.prompt(), "[~LEAF1]");
    run(&mut s, &["interface 100GE1/0/1"]);
    assert_eq!(s.prompt(), "[*LEAF1-100GE1/0/1]");
    run(&mut s, &["acl number 3001"]);
    assert_eq!(s.prompt(), "[*LEAF1-acl4-advance-3001]");
    run(&mut s, &["ip vpn-instance JOB7", "ipv4-family"]);
    assert_eq!(s.prompt(), "[*LEAF1-vpn-instance-JOB7-af-ipv4]");
    run(&mut s, &["quit"]);
    assert_eq!(s.prompt(), "[*LEAF1-vpn-instance-JOB7]");
    run(&mut s, &["return"]);
    assert_eq!(s.prompt(), "<LEAF1>");
    run(&mut s, &["system-view", "commit"]);
    assert_eq!(s.prompt(), "[~LEAF1]");
}

#[test]
fn unknown_command_prints_caret_under_the_error() {
    let mut s = CliSession::new(device(), "admin");
    let r = s.handle_line("bogus");
    assert_eq!(
        r.output,
        "       ^\nError: Unrecognized command found at '^' position.\n"
    );
    run(&mut s, &["system-view"]);
    let r = s.handle_line("display bogus");
    // "[~LEAF1]" is 8 wide; "display " is 8 more.
    assert_eq!(
        r.output.lines().next().unwrap(),
        format!("{}^", " ".repeat(16))
    );
    // Configuration commands are not user-view commands.
    let mut u = CliSession::new(device(), "admin");
    assert!(u
        .handle_line("interface 100GE1/0/1")
        .output
        .contains("Unrecognized"));
}

#[test]
fn candidates_are_private_until_commit() {
    let dev = device();
    let mut a = CliSession::new(dev.clone(), "a");
    let mut b = CliSession::new(dev.clone(), "b");
    run(
        &mut a,
        &["system-view", "interface 100GE1/0/1", "description from-a"],
    );
    run(
        &mut b,
        &["system-view", "acl number 3001", "rule 5 permit ip"],
    );
    // Neither sees the other's edits, and running has neither.
    assert!(!run(&mut b, &["display configuration candidate"]).contains("from-a"));
    assert!(!run(&mut a, &["display configuration candidate"]).contains("acl"));
    assert!(!run(&mut a, &["display current-configuration"]).contains("from-a"));
    run(&mut a, &["commit"]);
    // b's commit is replayed onto a's: both survive.
    run(&mut b, &["commit label B1"]);
    let cur = run(&mut b, &["display current-configuration"]);
    assert!(cur.contains(" description from-a\n") && cur.contains(" rule 5 permit ip\n"));
    let ids: Vec<u64> = dev.commits().iter().map(|c| c.id).collect();
    assert_eq!(ids, vec![FIRST_COMMIT_ID, FIRST_COMMIT_ID + 1]);
    let list = run(&mut a, &["display configuration commit list"]);
    let rows: Vec<&str> = list.lines().filter(|l| l.contains("100000000")).collect();
    assert!(rows[0].contains("1000000002") && rows[0].contains("B1") && rows[0].contains(" b "));
    assert!(rows[1].contains("1000000001"));
}

#[test]
fn conflicting_commit_is_refused_and_candidate_kept() {
    let dev = device();
    let mut a = CliSession::new(dev.clone(), "a");
    run(&mut a, &["system-view", "acl number 3001", "commit"]);
    let mut b = CliSession::new(dev.clone(), "b");
    run(
        &mut b,
        &["system-view", "acl number 3001", "rule 5 permit ip"],
    );
    run(&mut a, &["undo acl number 3001", "commit"]);
    let r = b.handle_line("commit");
    assert!(r.output.starts_with("Error:"), "{}", r.output);
    assert!(b.is_dirty());
    assert!(!dev.running_config().render().contains("acl"));
}

#[test]
fn candidate_changes_and_clear() {
    let dev = device();
    let mut s = CliSession::new(dev.clone(), "admin");
    run(
        &mut s,
        &["system-view", "interface 100GE1/0/1", "description x"],
    );
    let d = run(&mut s, &["display configuration candidate changes"]);
    assert_eq!(d, "#\n+interface 100GE1/0/1\n+ description x\n");
    run(&mut s, &["clear configuration candidate"]);
    assert_eq!(
        run(&mut s, &["display configuration candidate changes"]),
        ""
    );
    assert_eq!(s.prompt(), "[~LEAF1-100GE1/0/1]");
    assert!(dev.commits().is_empty());
}

#[test]
fn undo_errors_and_commit_of_nothing() {
    let mut s = CliSession::new(device(), "admin");
    run(&mut s, &["system-view"]);
    let r = s.handle_line("undo interface LoopBack9");
    assert_eq!(r.output, "Error: The configuration does not exist.\n");
    assert!(s.handle_line("commit").output.starts_with("Info:"));
}

#[test]
fn rollback_to_commit_id_and_last() {
    let dev = device();
    let mut s = CliSession::new(dev.clone(), "admin");
    run(
        &mut s,
        &[
            "system-view",
            "interface 100GE1/0/1",
            "description one",
            "commit",
        ],
    );
    run(&mut s, &["description two", "commit", "return"]);
    assert!(dev.running_config().render().contains("description two"));
    // Rollback is a user-view command.
    run(&mut s, &["rollback configuration to commit-id 1000000001"]);
    let cur = dev.running_config().render();
    assert!(cur.contains("description one") && !cur.contains("two"));
    // The rollback is a commit point of its own; `last 1` undoes it.
    assert_eq!(dev.commits().len(), 3);
    run(&mut s, &["rollback configuration last 1"]);
    assert!(dev.running_config().render().contains("description two"));
    let r = s.handle_line("rollback configuration to commit-id 42");
    assert!(r.output.starts_with("Error:"));
    let r = s.handle_line("rollback configuration last 9");
    assert!(r.output.starts_with("Error:"));
}

#[test]
fn faults_fail_drop_and_refuse_commit() {
    let dev = device();
    let mut s = CliSession::new(dev.clone(), "admin");
    run(
        &mut s,
        &["system-view", "interface 100GE1/0/1", "description x"],
    );
    dev.faults().refuse_commits(true);
    let r = s.handle_line("commit");
    assert!(r.output.starts_with("Error:"));
    assert!(s.is_dirty(), "a refused commit keeps the candidate");
    dev.faults().clear();
    dev.faults().fail_after(Some(1));
    assert_eq!(
        s.handle_line("display current-configuration").action,
        SessionAction::Continue
    );
    assert_eq!(s.handle_line("commit").output, BUSY);
    dev.faults().clear();
    dev.faults().drop_next();
    assert_eq!(s.handle_line("commit").action, SessionAction::Drop);
    assert!(dev.commits().is_empty());
    assert_eq!(s.handle_line("commit").output, "");
    assert_eq!(dev.commits().len(), 1);
}

#[test]
fn utc_formats_known_instants() {
    let t = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(951_827_696);
    assert_eq!(utc(t), "2000-02-29 12:34:56");
}

#[test]
fn wrong_parameters_and_unknown_interfaces_are_refused_with_a_caret() {
    let dev = SwitchDevice::with_interfaces(
        "LEAF1",
        VrpConfig::new("LEAF1"),
        Arc::new(Faults::new()),
        ["100GE1/0/1".to_string()],
    );
    let mut s = CliSession::new(dev.clone(), "admin");
    run(&mut s, &["system-view"]);
    // "[~LEAF1]" is 8 wide; `interface ` 10 more.
    let r = s.handle_line("interface 100GE1/0/2");
    assert_eq!(
        r.output,
        format!(
            "{}^\nError: Wrong parameter found at '^' position.\n",
            " ".repeat(18)
        )
    );
    assert_eq!(s.prompt(), "[~LEAF1]", "nothing entered, nothing changed");
    run(
        &mut s,
        &[
            "interface 100GE1/0/1",
            // A sub-interface needs a Layer-3 main interface.
            "undo portswitch",
            "interface 100GE1/0/1.10",
            "interface Eth-Trunk1",
        ],
    );
    run(&mut s, &["interface 100GE1/0/1"]);
    // "[*LEAF1-100GE1/0/1]" is 19 wide; `ip address ` 11 more.
    let r = s.handle_line("ip address 10.0.0.300 31");
    assert_eq!(
        r.output.lines().next().unwrap(),
        format!("{}^", " ".repeat(30))
    );
    assert!(r.output.contains("Error: Wrong parameter found"));
    run(&mut s, &["commit"]);
    assert!(!dev.running_config().render().contains("10.0.0.300"));
}
