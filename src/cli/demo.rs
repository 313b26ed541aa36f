//! `vclos demo`: the main job on the embedded default fabric.
//!
//! Starts the emulated fabric of testbed-ocs.yaml on loopback (switches over
//! SSH with the Huawei CE CLI, the OCS over Telnet/TL1 with 50 ms
//! switching), aims a copy of the topology at it, and drives a sequence of
//! jobs through the real placement engine, planner, controller, drivers and
//! protocols: each step prints its decision and per-device diff, applies it as
//! one transaction, then reads every device's running configuration back and
//! verifies isolation from that device state. It ends with every job released
//! and checks that every device is back to its starting configuration. Exit 0
//! only if every step and every verification passed.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use vclos::controller::{NoProgress, TopologyDrivers};
use vclos::decision::Decision;
use vclos::diff::colorize;
use vclos::emulator::fabric::{EmulatedFabric, FabricOptions};
use vclos::jobs::Fabric;
use vclos::names::JobId;
use vclos::placement::Policy;
use vclos::plan::Plan;
use vclos::state::store;
use vclos::topology::{self, Topology};
use vclos::verification::{fetch::fetch_configs, verify_fabric};

/// The reference topology the demo runs on, embedded so `demo` works from anywhere.
const TESTBED_OCS: &str = include_str!("../../topologies/testbed-ocs.yaml");
const PASSWORD_VAR: &str = "VCLOS_DEMO_PASSWORD";

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Topology to emulate (default: the embedded topologies/testbed-ocs.yaml).
    #[arg(long)]
    topology: Option<PathBuf>,
    /// OCS switching time in milliseconds.
    #[arg(long = "switch-delay-ms", default_value_t = 50)]
    switch_delay_ms: u64,
    /// Print every line of every diff (default: the first lines per device).
    #[arg(long)]
    full_diff: bool,
    /// Keep the retargeted topology, known_hosts and state here (default: a temporary directory).
    #[arg(long)]
    workdir: Option<PathBuf>,
}

enum Action {
    Submit {
        job: &'static str,
        gpus: u32,
        policy: Policy,
    },
    Release(&'static str),
}

/// The script: fill the fabric with one-leaf jobs, release some so no leaf
/// has four idle servers, then place 16-GPU jobs across both leaves, first
/// with vClos (leaf source routing + one VRF per job per spine), then with
/// OCS-vClos (rewiring idle OCS links), then release everything.
const SCRIPT: &[(Action, &str)] = &[
    (
        Action::Submit {
            job: "a",
            gpus: 8,
            policy: Policy::OcsVclos,
        },
        "two whole servers under one leaf: traffic never leaves the leaf",
    ),
    (
        Action::Submit {
            job: "b",
            gpus: 8,
            policy: Policy::OcsVclos,
        },
        "the leaf with the fewest idle servers that fits",
    ),
    (
        Action::Submit {
            job: "c",
            gpus: 8,
            policy: Policy::OcsVclos,
        },
        "the other leaf",
    ),
    (
        Action::Submit {
            job: "d",
            gpus: 8,
            policy: Policy::OcsVclos,
        },
        "the fabric is full",
    ),
    (Action::Release("a"), "two idle servers on leaf1"),
    (
        Action::Release("c"),
        "two idle servers on each leaf: a 16-GPU job must span both",
    ),
    (
        Action::Submit {
            job: "e",
            gpus: 16,
            policy: Policy::Vclos,
        },
        "vClos: 2 virtual leaves x 8 virtual spines over unused links",
    ),
    (Action::Release("b"), ""),
    (Action::Release("d"), ""),
    (
        Action::Submit {
            job: "f",
            gpus: 16,
            policy: Policy::OcsVclos,
        },
        "OCS-vClos: rewire idle OCS ports for a second isolated slice",
    ),
    (
        Action::Release("e"),
        "releasing restores exactly what e changed",
    ),
    (
        Action::Release("f"),
        "the OCS goes back to its initial patches",
    ),
];

pub fn run(args: DemoArgs) -> Result<ExitCode> {
    // Set before the runtime starts any thread: the retargeted topology
    // names this variable as the emulator's password.
    std::env::set_var(PASSWORD_VAR, "admin");
    let rt = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    rt.block_on(demo(args))
}

struct Row {
    step: usize,
    what: String,
    stage: &'static str,
    devices: usize,
    commands: usize,
    apply_ms: f64,
    verified: bool,
}

async fn demo(args: DemoArgs) -> Result<ExitCode> {
    let (file, text) = topology_text(&args)?;
    let topo = Arc::new(topology::from_str(&file, &text)?);
    let color = std::io::stdout().is_terminal();
    let emu = start_emulator(topo.clone(), &file, args.switch_delay_ms).await?;

    // A topology aimed at the emulator, with its host keys, as a user would
    // get from `vclos emu serve --write-topology`.
    let tmp = tempfile::tempdir()?;
    let work = args
        .workdir
        .clone()
        .unwrap_or_else(|| tmp.path().to_path_buf());
    std::fs::create_dir_all(&work)?;
    let aimed = emu.aim(&file, &text, &work.join("known_hosts"), PASSWORD_VAR)?;
    std::fs::write(work.join("topology.yaml"), &aimed)?;
    let topo = Arc::new(topology::from_str("topology.yaml", &aimed)?);
    let state_dir = work.join("state");
    let before = read_all(&topo).await?;
    println!(
        "  read the starting configuration of {} devices through SSH and Telnet/TL1\n",
        before.len()
    );

    store::init(&state_dir, &topo.name)?;
    let mut fabric = Fabric::load(topo.clone(), &state_dir)?;
    let mut rows = Vec::new();
    let mut failed = 0;
    for (i, (action, note)) in SCRIPT.iter().enumerate() {
        let step = i + 1;
        let (plan, title) = match action {
            Action::Submit { job, gpus, policy } => {
                fabric = fabric.with_policy(*policy);
                let plan = fabric.plan_submit(&JobId::new(*job)?, *gpus)?;
                (plan, format!("submit {job} ({gpus} GPUs, {policy})"))
            }
            Action::Release(job) => (
                fabric.plan_release(&JobId::new(*job)?)?,
                format!("release {job}"),
            ),
        };
        announce_step(step, &title, note, action, &plan, args.full_diff, color)?;
        let t = Instant::now();
        let report = fabric.apply(&plan, &NoProgress).await?;
        let apply_ms = t.elapsed().as_secs_f64() * 1e3;
        if !report.is_committed() {
            println!("{report}");
            bail!("step {step}: the transaction did not commit");
        }
        let verified = verify(&topo, &fabric.jobs()).await?;
        if !verified {
            failed += 1;
        }
        println!(
            "   applied in {apply_ms:.0} ms; verification from device state: {}\n",
            if verified { "OK" } else { "FAILED" }
        );
        rows.push(Row {
            step,
            what: title,
            stage: plan.decision.stage.name(),
            devices: plan.devices.len(),
            commands: plan.devices.iter().map(|d| d.diff.commands.len()).sum(),
            apply_ms,
            verified,
        });
    }
    // The fabric kept one session per device open across the twelve
    // transactions (verification reads through fresh ones, independently).
    fabric.shutdown().await;

    let after = read_all(&topo).await?;
    let changed: Vec<&String> = before
        .keys()
        .filter(|d| before.get(*d) != after.get(*d))
        .collect();
    print_summary(&rows, &changed);
    let ok = failed == 0 && changed.is_empty();
    println!("{}", if ok { "demo passed" } else { "demo FAILED" });
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The topology file's name and text: `--topology`, or the embedded testbed.
fn topology_text(args: &DemoArgs) -> Result<(String, String)> {
    Ok(match &args.topology {
        Some(p) => (
            p.display().to_string(),
            vclos_core::yaml::read_text_capped(p, topology::MAX_FILE_BYTES)
                .map_err(|why| anyhow::anyhow!("reading {}: {why}", p.display()))?,
        ),
        None => (
            "topologies/testbed-ocs.yaml".to_string(),
            TESTBED_OCS.to_string(),
        ),
    })
}

/// Start the emulated fabric of `topo` and print its endpoints.
async fn start_emulator(
    topo: Arc<Topology>,
    file: &str,
    switch_delay_ms: u64,
) -> Result<EmulatedFabric> {
    let opts = FabricOptions {
        switch_delay: Duration::from_millis(switch_delay_ms),
        ..FabricOptions::default()
    };
    let started = Instant::now();
    let emu = EmulatedFabric::start(topo, opts).await?;
    println!(
        "vclos demo: the emulated fabric of {file} on loopback ({} ms to start)",
        started.elapsed().as_millis()
    );
    for (dev, e) in emu.endpoints() {
        println!(
            "  {dev:<8} {:<11} {}:{}",
            e.protocol.to_string(),
            e.host,
            e.port
        );
    }
    Ok(emu)
}

/// Print a step's title, decision and plan; fail if step f's OCS-vClos
/// decision rewires nothing.
fn announce_step(
    step: usize,
    title: &str,
    note: &str,
    action: &Action,
    plan: &Plan,
    full_diff: bool,
    color: bool,
) -> Result<()> {
    println!(
        "── step {step}: {title}{}",
        if note.is_empty() {
            String::new()
        } else {
            format!(" — {note}")
        }
    );
    describe(&plan.decision, matches!(action, Action::Submit { .. }));
    show_plan(plan, full_diff, color);
    if title.starts_with("submit f") && plan.decision.vclos.cross_connects.is_empty() {
        bail!("step {step}: expected OCS-vClos to rewire OCS ports, but its decision has no cross-connects");
    }
    Ok(())
}

/// Print the summary table and which devices are not back to their start.
fn print_summary(rows: &[Row], changed: &[&String]) {
    println!("summary");
    println!(
        "  {:>4}  {:<34} {:<14} {:>7} {:>8} {:>9}  verified",
        "step", "action", "stage", "devices", "commands", "apply ms"
    );
    for r in rows {
        println!(
            "  {:>4}  {:<34} {:<14} {:>7} {:>8} {:>9.0}  {}",
            r.step,
            r.what,
            r.stage,
            r.devices,
            r.commands,
            r.apply_ms,
            if r.verified { "ok" } else { "FAILED" }
        );
    }
    if changed.is_empty() {
        println!("  every device is back to its starting configuration");
    } else {
        println!("  devices NOT back to their starting configuration: {changed:?}");
    }
}

fn describe(d: &Decision, admit: bool) {
    let mut servers: Vec<&str> = d.gpus.iter().map(|g| &*g.server).collect();
    servers.dedup();
    let verb = if admit { "decision" } else { "held" };
    print!(
        "   {verb}: stage {}, GPUs on {}",
        d.stage.name(),
        servers.join(" ")
    );
    if !d.vclos.spines.is_empty() {
        print!("; virtual spines {}", d.vclos.spines.join(" "));
    }
    if !d.vclos.cross_connects.is_empty() {
        let xc: Vec<String> = d
            .vclos
            .cross_connects
            .iter()
            .map(|x| format!("{}:{}~{}", x.ocs, x.a, x.b))
            .collect();
        print!("; OCS cross-connects {}", xc.join(" "));
    }
    println!();
}

fn show_plan(plan: &Plan, full: bool, color: bool) {
    if plan.devices.is_empty() {
        println!("   no device changes");
        return;
    }
    for d in &plan.devices {
        let diff = &d.diff;
        println!(
            "   stage {} {} {}: +{} -{} intent items, {} commands",
            d.stage,
            diff.role,
            diff.device,
            diff.added.len(),
            diff.removed.len(),
            diff.commands.len()
        );
        let lines: Vec<&str> = diff.diff.lines().collect();
        let shown = if full {
            lines.len()
        } else {
            lines.len().min(12)
        };
        let text = lines[..shown].join("\n");
        let text = if color { colorize(&text) } else { text };
        for l in text.lines() {
            println!("     {l}");
        }
        if shown < lines.len() {
            println!(
                "     ... {} more diff lines (--full-diff shows all)",
                lines.len() - shown
            );
        }
    }
}

/// Every device's running configuration, through its real driver.
async fn read_all(topo: &Arc<Topology>) -> Result<BTreeMap<String, String>> {
    let factory = Arc::new(TopologyDrivers::new(topo.clone()));
    let names = topo.devices.iter().map(|d| d.name.clone()).collect();
    let mut out = BTreeMap::new();
    for (dev, r) in fetch_configs(factory, names, 16).await {
        out.insert(dev.clone(), r.with_context(|| format!("reading {dev}"))?);
    }
    Ok(out)
}

/// Verify every held job from the devices' running configurations.
async fn verify(topo: &Arc<Topology>, held: &[Decision]) -> Result<bool> {
    let configs = read_all(topo).await?;
    let reports = verify_fabric(topo, held, &configs)?;
    let mut ok = true;
    for r in &reports {
        for v in &r.violations {
            ok = false;
            println!("   violation ({}): {v}", r.job);
        }
    }
    let flows: usize = reports.iter().map(|r| r.flows).sum();
    println!(
        "   verified {} job(s), {flows} GPU-to-GPU flows followed hop by hop",
        held.len()
    );
    Ok(ok)
}
