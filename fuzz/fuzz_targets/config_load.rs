//! The config file, from outside (an operator's hand-written TOML): read, deserialized and
//! validated by `Config::from_toml`, the whole of `Config::load` but the file read. Every
//! environment variable the file names is set, except those whose name contains `UNSET`, so
//! both the "secret missing" and the "secret present" paths are reachable.
#![no_main]

use std::path::Path;

use baton::config::Config;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // A directory that does not exist: relative prompt files resolve to nothing.
    let base = Path::new("/nonexistent/baton-fuzz");
    let env = |name: &str| (!name.contains("UNSET")).then(|| "fuzz-secret-value".to_owned());
    if let Err(problems) = Config::from_toml(text, base, &env) {
        assert!(!problems.is_empty(), "a refused config names its problems");
        let lines = text.lines().count() + 1;
        for problem in &problems {
            assert!(
                problem.line.is_none_or(|line| line <= lines),
                "{problem} points past the end of a {lines}-line file"
            );
        }
    }
});
