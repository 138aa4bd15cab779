//! The `baton` binary: everything lives in the library; see [`baton::cli`].

fn main() -> std::process::ExitCode {
    baton::cli::main()
}

/// mimalloc (v3, without transparent huge pages, so an idle gateway stays small): a store job's
/// data is allocated on a tokio worker and freed on the writer thread, which glibc's malloc
/// serialises on its arena locks; mimalloc frees across threads without one. It gave 35-40%
/// more events and round trips between bots a second (BENCHMARKS.md, issue 23).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
