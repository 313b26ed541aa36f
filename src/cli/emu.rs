//! `vclos emu serve`: the emulated fabric of a topology on loopback.

use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use vclos::emulator::fabric::{EmulatedFabric, FabricOptions};
use vclos::emulator::timeouts::{self, SessionTimeouts};
use vclos::emulator::Login;
use vclos::topology;

#[derive(Debug, Subcommand)]
pub enum EmuCmd {
    /// Serve every device of a topology on loopback until SIGINT/SIGTERM.
    Serve(ServeArgs),
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    #[arg(long)]
    topology: PathBuf,
    /// Address to listen on (ports are ephemeral).
    #[arg(long, default_value = "127.0.0.1")]
    listen: IpAddr,
    /// OCS switching time in milliseconds.
    #[arg(long = "switch-delay-ms", default_value_t = 50)]
    switch_delay_ms: u64,
    /// Login every emulated device accepts (emulator only).
    #[arg(long, default_value = "admin")]
    user: String,
    /// Password every emulated device accepts (emulator only; see
    /// --password-env). Taken from $VCLOS_EMU_PASSWORD when that is set, so
    /// it need not be on the command line, where `ps` shows it.
    #[arg(
        long,
        env = "VCLOS_EMU_PASSWORD",
        hide_env_values = true,
        default_value = "admin"
    )]
    password: String,
    /// Environment variable that the written topology names for the password.
    #[arg(long = "password-env", default_value = "VCLOS_EMU_PASSWORD")]
    password_env: String,
    /// Write a copy of the topology whose endpoints point at the emulator (and
    /// the emulator's SSH host keys to OUT.known_hosts, which it references).
    #[arg(long = "write-topology", value_name = "OUT.yaml")]
    write_topology: Option<PathBuf>,
    /// Close a connection that has not logged in this many seconds after
    /// connecting (SSH authentication, TL1 ACT-USER; OpenSSH's
    /// LoginGraceTime). 0: never.
    #[arg(long = "login-timeout-secs", default_value_t = timeouts::DEFAULT_LOGIN_TIMEOUT.as_secs())]
    login_timeout_secs: u64,
    /// Close a logged-in session that sent nothing for this many seconds
    /// (a command still running never counts as idle). 0: never.
    #[arg(long = "idle-timeout-secs", default_value_t = timeouts::DEFAULT_IDLE_TIMEOUT.as_secs())]
    idle_timeout_secs: u64,
    /// Arm a fault: DEVICE:drop | DEVICE:delay=MS | DEVICE:refuse-commit | DEVICE:fail-after=N.
    #[arg(long = "fault", value_name = "DEVICE:KIND")]
    faults: Vec<String>,
}

pub fn run(cmd: EmuCmd) -> Result<ExitCode> {
    match cmd {
        EmuCmd::Serve(args) => {
            let rt = tokio::runtime::Runtime::new().context("starting the async runtime")?;
            rt.block_on(serve(args))
        }
    }
}

async fn serve(args: ServeArgs) -> Result<ExitCode> {
    let text = vclos_core::yaml::read_text_capped(&args.topology, topology::MAX_FILE_BYTES)
        .map_err(|why| anyhow::anyhow!("reading {}: {why}", args.topology.display()))?;
    let file = args.topology.display().to_string();
    let topo = Arc::new(topology::from_str(&file, &text)?);
    let opts = FabricOptions {
        listen: args.listen,
        switch_delay: Duration::from_millis(args.switch_delay_ms),
        login: Login {
            username: args.user.clone(),
            password: args.password.clone(),
        },
        timeouts: SessionTimeouts::from_secs(args.login_timeout_secs, args.idle_timeout_secs),
    };
    let fabric = EmulatedFabric::start(topo, opts).await?;
    for f in &args.faults {
        arm(&fabric, f)?;
    }
    if let Some(out) = &args.write_topology {
        // Host keys are fresh each start: write them beside the topology,
        // referenced by an absolute path so the file works from anywhere.
        let kh = std::path::absolute(out.with_extension("known_hosts"))?;
        let yaml = fabric.aim(&file, &text, &kh, &args.password_env)?;
        std::fs::write(out, yaml).with_context(|| format!("writing {}", out.display()))?;
    }
    // Listen for signals before announcing the endpoints: whoever reads the
    // first line may stop us straight away.
    let stop = stop_signal()?;
    // The first stdout line is the machine-readable endpoint map.
    println!("{}", serde_json::to_string(fabric.endpoints())?);
    eprintln!(
        "serving {} devices on {}; Ctrl-C to stop",
        fabric.endpoints().len(),
        args.listen
    );
    stop.await?;
    eprintln!("stopping");
    Ok(ExitCode::SUCCESS)
}

fn arm(fabric: &EmulatedFabric, spec: &str) -> Result<()> {
    let Some((device, kind)) = spec.split_once(':') else {
        bail!("--fault {spec:?}: expected DEVICE:KIND");
    };
    let f = fabric.faults(device)?;
    let (kind, value) = kind.split_once('=').unwrap_or((kind, ""));
    let number = |what: &str| -> Result<u64> {
        value
            .parse()
            .with_context(|| format!("--fault {spec:?}: {what} needs a number, e.g. {kind}=20"))
    };
    match kind {
        "drop" => f.drop_next(),
        "refuse-commit" => f.refuse_commits(true),
        "delay" => f.delay_replies(Duration::from_millis(number("delay")?)),
        "fail-after" => f.fail_after(Some(number("fail-after")?)),
        other => bail!("--fault {spec:?}: unknown fault `{other}` (drop, delay=MS, refuse-commit, fail-after=N)"),
    }
    Ok(())
}

/// A future that resolves on SIGINT or SIGTERM; the handlers are installed
/// when this returns, not when it is first polled.
fn stop_signal() -> Result<impl std::future::Future<Output = Result<()>>> {
    #[cfg(unix)]
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    #[cfg(unix)]
    let mut int = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
    Ok(async move {
        #[cfg(unix)]
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        #[cfg(not(unix))]
        tokio::signal::ctrl_c().await?;
        Ok(())
    })
}
