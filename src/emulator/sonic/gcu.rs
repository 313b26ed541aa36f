//! `config`: the Generic Config Updater of the emulated switch, as
//! sonic-utilities words it.
//!
//! `config apply-patch [--dry-run] FILE`, `config replace [--dry-run] FILE`,
//! `config checkpoint NAME`, `config rollback NAME`, `config
//! list-checkpoints`, `config delete-checkpoint NAME`, `config save -y` (an
//! acknowledgement: the emulator keeps no startup file). Files are read from
//! the emulated `/tmp`. Errors end with click's `Error:` line.

use vclos_drivers::configdb;

use super::session::{click_error, Out};
use super::SonicDevice;
use crate::emulator::faults::Action;

/// The wording of the Generic Config Updater's two ways to change running.
#[derive(Debug)]
struct Updater {
    replace: bool,
    cmd: &'static str,
    arg: &'static str,
    what: &'static str,
    noun: &'static str,
    tool: &'static str,
    start: &'static str,
    success: &'static str,
}

const PATCH: Updater = Updater {
    replace: false,
    cmd: "config apply-patch",
    arg: "PATCH_FILE_PATH",
    what: "apply patch",
    noun: "patch",
    tool: "Patch Applier: localhost",
    start: "Patch application starting.",
    success: "Patch applied successfully.",
};

const REPLACE: Updater = Updater {
    replace: true,
    cmd: "config replace",
    arg: "TARGET_FILE_PATH",
    what: "replace config",
    noun: "target config",
    tool: "Config Replacer",
    start: "Config replacement starting.",
    success: "Config replaced successfully.",
};

/// `config ARGS...` (root already checked).
pub(super) fn config(dev: &SonicDevice, args: &[&str]) -> Out {
    let dry = |a: &[&str]| match a {
        ["-d" | "--dry-run", f] => Some((true, f.to_string())),
        [f] if !f.starts_with('-') => Some((false, f.to_string())),
        _ => None,
    };
    match args {
        ["apply-patch", rest @ ..] => match dry(rest) {
            Some((d, f)) => apply(dev, &f, d, &PATCH),
            None => click_error(PATCH.cmd, "[OPTIONS] PATCH_FILE_PATH", "Invalid arguments."),
        },
        ["replace", rest @ ..] => match dry(rest) {
            Some((d, f)) => apply(dev, &f, d, &REPLACE),
            None => click_error(REPLACE.cmd, "[OPTIONS] TARGET_FILE_PATH", "Invalid arguments."),
        },
        ["checkpoint", name] => checkpoint(dev, name),
        ["rollback", name] => rollback(dev, name),
        ["delete-checkpoint", name] => {
            if dev.state().checkpoints.remove(*name).is_some() {
                Out::stdout("Checkpoint deleted successfully.\n")
            } else {
                Out::stderr(format!("Error: Checkpoint '{name}' does not exist\n"))
            }
        }
        ["list-checkpoints"] => Out::stdout(configdb::pretty(&dev.checkpoints())),
        ["save", "-y"] => Out::stdout(
            "Running command: /usr/local/bin/sonic-cfggen -d --print-data > /etc/sonic/config_db.json\n",
        ),
        ["save"] => Out::stdout("Existing files will be overwritten, continue? [y/N]: \nAborted!\n"),
        [sub, ..] => click_error(
            "config",
            "[OPTIONS] COMMAND [ARGS]...",
            &format!("No such command \"{sub}\"."),
        ),
        [] => click_error("config", "[OPTIONS] COMMAND [ARGS]...", "Missing command."),
    }
}

/// `config apply-patch` or `config replace` of `file`.
fn apply(dev: &SonicDevice, file: &str, dry_run: bool, u: &Updater) -> Out {
    let usage = format!("[OPTIONS] {}", u.arg);
    let fail = |e: String| {
        let mut o = click_error(u.cmd, &usage, &e);
        o.stderr
            .insert_str(0, &format!("Failed to {} due to: {e}\n", u.what));
        o
    };
    let Some(text) = dev.file(file) else {
        let e = format!(
            "Invalid value for '{}': Path '{file}' does not exist.",
            u.arg
        );
        return click_error(u.cmd, &usage, &e);
    };
    if !dry_run && dev.faults.on_commit() == Action::Fail {
        return fail("the device refused the change (injected fault)".into());
    }
    let changed = if u.replace {
        configdb::parse(&text).and_then(|mut doc| {
            configdb::prune(&mut doc);
            dev.change(dry_run, |_| Ok(doc))
        })
    } else {
        configdb::parse_patch(&text)
            .and_then(|p| dev.change(dry_run, |running| configdb::apply(running, &p)))
    };
    match changed {
        Err(e) => fail(format!("Given {} will produce invalid config: {e}", u.noun)),
        Ok(()) => {
            let how = if dry_run {
                "Dry run: nothing written."
            } else {
                u.start
            };
            Out::stdout(format!("{}: {how}\n{}\n", u.tool, u.success))
        }
    }
}

fn checkpoint(dev: &SonicDevice, name: &str) -> Out {
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        return Out::stderr(format!(
            "Failed to create a config checkpoint due to: invalid name '{name}'\nError: invalid name '{name}'\n"
        ));
    }
    let mut st = dev.state();
    let running = st.running.clone();
    st.checkpoints.insert(name.to_string(), running);
    Out::stdout(
        "Config Rollbacker: Config checkpoint starting.\nCheckpoint created successfully.\n",
    )
}

fn rollback(dev: &SonicDevice, name: &str) -> Out {
    let cp = dev.state().checkpoints.get(name).cloned();
    let Some(cp) = cp else {
        let e = format!("Checkpoint '{name}' does not exist");
        return Out::stderr(format!(
            "Failed to rollback config due to: {e}\nError: {e}\n"
        ));
    };
    match dev.change(false, |_| Ok(cp)) {
        Ok(()) => Out::stdout(
            "Config Rollbacker: Config rollback starting.\nConfig rolled back successfully.\n",
        ),
        Err(e) => Out::stderr(format!(
            "Failed to rollback config due to: {e}\nError: {e}\n"
        )),
    }
}
