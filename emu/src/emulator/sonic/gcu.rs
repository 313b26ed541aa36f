//! `config`: the Generic Config Updater of the emulated switch, as
//! sonic-utilities words it.
//!
//! `config apply-patch [-d] [-i PATH]... FILE`, `config replace [-d] [-i
//! PATH]... FILE`, `config checkpoint NAME`, `config rollback [-i PATH]...
//! NAME`, `config list-checkpoints`, `config delete-checkpoint NAME`,
//! `config save -y` (an acknowledgement: the emulator keeps no startup
//! file). Files are read from the emulated `/tmp`. Errors end with click's
//! `Error:` line and exit 2 (`ctx.fail`).
//!
//! `-i`/`--ignore-path` is the hidden option of sonic-net/sonic-utilities
//! `config/main.py` (`apply_patch`, `replace`, `rollback`: "ignore validation
//! for config specified by given path which is a JsonPointer"): the paths are
//! cut out of the document before it is checked against the models
//! (`generic_config_updater/patch_sorter.py`,
//! `IgnorePathsFromYangConfigSplitter`), and written all the same.

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
/// The options of `apply-patch`, `replace` and `rollback`, and the one
/// argument: `(dry_run, ignore_paths, argument)`.
fn options(mut a: &[&str]) -> Option<(bool, Vec<String>, String)> {
    let (mut dry, mut ignore) = (false, Vec::new());
    loop {
        match a {
            ["-d" | "--dry-run", rest @ ..] => {
                dry = true;
                a = rest;
            }
            ["-i" | "--ignore-path", p, rest @ ..] => {
                ignore.push(p.to_string());
                a = rest;
            }
            [f] if !f.starts_with('-') => return Some((dry, ignore, f.to_string())),
            _ => return None,
        }
    }
}

pub(super) fn config(dev: &SonicDevice, args: &[&str]) -> Out {
    match args {
        ["apply-patch", rest @ ..] => match options(rest) {
            Some((d, i, f)) => apply(dev, &f, d, &i, &PATCH),
            None => click_error(PATCH.cmd, "[OPTIONS] PATCH_FILE_PATH", "Invalid arguments."),
        },
        ["replace", rest @ ..] => match options(rest) {
            Some((d, i, f)) => apply(dev, &f, d, &i, &REPLACE),
            None => click_error(REPLACE.cmd, "[OPTIONS] TARGET_FILE_PATH", "Invalid arguments."),
        },
        ["checkpoint", name] => checkpoint(dev, name),
        ["rollback", rest @ ..] => match options(rest) {
            Some((false, i, name)) => rollback(dev, &name, &i),
            _ => click_error("config rollback", "[OPTIONS] CHECKPOINT_NAME", "Invalid arguments."),
        },
        ["delete-checkpoint", name] => {
            if dev.state().checkpoints.remove(*name).is_some() {
                Out::stdout("Checkpoint deleted successfully.\n")
            } else {
                Out::stderr(format!(
                    "Failed to delete config checkpoint\nError: Checkpoint '{name}' does not exist\n"
                ))
                .code(2)
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
fn apply(dev: &SonicDevice, file: &str, dry_run: bool, ignore: &[String], u: &Updater) -> Out {
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
            dev.change(dry_run, ignore, |_| Ok(doc))
        })
    } else {
        configdb::parse_patch(&text)
            .map_err(|e| format!("invalid {}: {e}", u.noun))
            .and_then(|p| dev.change(dry_run, ignore, |running| configdb::apply(running, &p)))
    };
    match changed {
        Err(e) => fail(e),
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
        ))
        .code(2);
    }
    let mut st = dev.state();
    let running = st.running.clone();
    st.checkpoints.insert(name.to_string(), running);
    Out::stdout(
        "Config Rollbacker: Config checkpoint starting.\nCheckpoint created successfully.\n",
    )
}

fn rollback(dev: &SonicDevice, name: &str, ignore: &[String]) -> Out {
    let fail = |e: &str| {
        Out::stderr(format!(
            "Failed to rollback config due to: {e}\nError: {e}\n"
        ))
        .code(2)
    };
    let cp = dev.state().checkpoints.get(name).cloned();
    let Some(cp) = cp else {
        return fail(&format!("Checkpoint '{name}' does not exist"));
    };
    match dev.change(false, ignore, |_| Ok(cp)) {
        Ok(()) => Out::stdout(
            "Config Rollbacker: Config rollback starting.\nConfig rolled back successfully.\n",
        ),
        Err(e) => fail(&e),
    }
}
