//! The `vclos` binary: argument parsing and output only; all logic lives in
//! the library. Errors become `anyhow` here and nowhere else.
//!
//! The global allocator is mimalloc: a long trace replay keeps hundreds of
//! thousands of small allocations alive (waiting jobs, decisions, the
//! ledger) while placing churns through short-lived ones, and glibc's
//! malloc then spends most of its time consolidating and searching its
//! bins (docs/performance.md, "Replay length"); mimalloc's per-size free
//! lists keep each allocation constant-time.

mod cli;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    cli::main()
}
