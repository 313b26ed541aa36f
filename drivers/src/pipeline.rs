//! Replies to CLI commands sent in one go (pipelined), split per command.
//!
//! Typing a configuration line by line costs one round trip per line: 150
//! lines are 15 ms on loopback and far more over a WAN. Sent together, the
//! device still runs them one after the other, answering each with its
//! output and a prompt; it echoes the next line (typed ahead) right after
//! that prompt, as a terminal shows pasted text:
//!
//! ```text
//! acl name a advance              <- echo of command 1
//! [*leaf1-acl4-advance-a]rule 5 permit ip   <- prompt 1, echo of command 2
//! Error: ...                      <- output of command 2
//! [*leaf1-acl4-advance-a]         <- prompt 2 (the last: nothing after it)
//! ```
//!
//! [`split_replies`] finds those prompt lines (the device's prompt followed
//! by the next command's echo, or by nothing on a device that does not
//! echo) and returns each command's output. It is pure and takes the
//! device's prompt test, so the framing is tested without a socket and
//! serves any CLI.

/// Whether `line` is the reply boundary before `next`: a prompt carrying
/// `next`'s echo, or a bare prompt.
fn boundary(line: &str, next: &str, is_prompt: fn(&str) -> bool) -> bool {
    let next = next.trim();
    let echoed = line
        .trim_end()
        .strip_suffix(next)
        .is_some_and(|p| !next.is_empty() && is_prompt(p));
    echoed || is_prompt(line)
}

/// Split the text received (carriage returns removed) after sending `cmds`
/// in one go into each command's output, echo and prompts removed, plus the
/// final prompt. `None` while the last command's prompt has not arrived.
pub fn split_replies(
    text: &str,
    cmds: &[&str],
    is_prompt: fn(&str) -> bool,
) -> Option<(Vec<String>, String)> {
    let (last, cmds) = cmds.split_last()?;
    let (tail, done) = text.rsplit_once('\n').map_or((text, ""), |(d, t)| (t, d));
    let mut lines = done.split('\n');
    let mut out = Vec::with_capacity(cmds.len() + 1);
    let mut body = String::new();
    // The first command's echo, or a non-echoing device's bare newline.
    let first = lines.next()?;
    let echoed = cmds.first().unwrap_or(last);
    if !(first.trim().is_empty() || first.trim_end().ends_with(echoed.trim())) {
        body.push_str(first);
        body.push('\n');
    }
    for line in lines {
        let next = cmds.get(out.len() + 1).unwrap_or(last);
        if out.len() < cmds.len() && boundary(line, next, is_prompt) {
            out.push(std::mem::take(&mut body));
        } else {
            body.push_str(line);
            body.push('\n');
        }
    }
    if out.len() < cmds.len() || !is_prompt(tail) {
        return None;
    }
    out.push(body);
    Some((out, tail.trim_end().to_string()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::ssh::{is_bash_prompt, is_vrp_prompt as vrp};

    #[test]
    fn splits_echoing_replies_and_waits_for_the_last_prompt() {
        let cmds = [
            "system-view",
            "acl name a advance",
            "rule 5 permit ip",
            "bad",
        ];
        let text = "system-view\nEnter system view.\n[~leaf1]acl name a advance\n\
                    [*leaf1-acl4-advance-a]rule 5 permit ip\n\
                    [*leaf1-acl4-advance-a]bad\n  ^\nError: Unrecognized command.\n\
                    [*leaf1-acl4-advance-a]";
        let (outs, prompt) = split_replies(text, &cmds, vrp).unwrap();
        assert_eq!(
            outs,
            vec![
                "Enter system view.\n",
                "",
                "",
                "  ^\nError: Unrecognized command.\n"
            ]
        );
        assert_eq!(prompt, "[*leaf1-acl4-advance-a]");
        // Any prefix of it is incomplete.
        for cut in 0..text.len() {
            assert!(split_replies(&text[..cut], &cmds, vrp).is_none(), "{cut}");
        }
    }

    #[test]
    fn a_device_that_does_not_echo_and_a_single_command() {
        let (outs, p) = split_replies("\nInfo: x\n<sw>\n<sw>", &["a", "b"], vrp).unwrap();
        assert_eq!(
            (outs, p.as_str()),
            (vec!["Info: x\n".into(), String::new()], "<sw>")
        );
        let (outs, _) = split_replies("quit\n[~sw]", &["quit"], vrp).unwrap();
        assert_eq!(outs, vec![String::new()]);
        assert!(split_replies("x", &[], vrp).is_none());
    }

    #[test]
    fn output_that_looks_like_a_prompt_but_is_not_one_stays_output() {
        // A prompt followed by something other than the next command's echo
        // is the device talking, not a reply boundary.
        let cmds = ["a", "b"];
        let text = "a\n[~sw]not b\n[~sw]b\n[~sw]";
        let (outs, _) = split_replies(text, &cmds, vrp).unwrap();
        assert_eq!(outs, vec!["[~sw]not b\n".to_string(), String::new()]);
    }

    #[test]
    fn any_prompt_test_serves() {
        let cmds = ["echo a", "ls"];
        let text = "echo a\na\nadmin@sonic:~$ ls\nf\nadmin@sonic:~$ ";
        let (outs, p) = split_replies(text, &cmds, is_bash_prompt).unwrap();
        assert_eq!(outs, vec!["a\n".to_string(), "f\n".to_string()]);
        assert_eq!(p, "admin@sonic:~$");
    }
}
