//! The `baton` binary: everything lives in the library; see [`baton::cli`].

fn main() -> std::process::ExitCode {
    baton::cli::main()
}
