//! The `baton` binary: everything lives in the library; see [`baton::cli`].

/// mimalloc, not glibc's malloc: under load glibc's was a fifth of the gateway's CPU time, in
/// its arena locks and consolidation (BENCHMARKS.md, issue 23).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    baton::cli::main()
}
