//! The `vclos` binary: argument parsing and output only; all logic lives in
//! the library. Errors become `anyhow` here and nowhere else.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
