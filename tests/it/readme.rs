//! The README's quick start, run as written. The commands are read out of the code blocks of
//! "The two commands", so the test breaks when the README drifts from what baton does: the
//! first block builds and starts the demo, the second talks to it with `curl` and the `baton`
//! binary. Each `# => TEXT` line under a command is a piece of what that command must print.
//!
//! The test's own `baton` binary stands in for `target/debug/baton`; the demo runs in a
//! temporary directory (its `baton-demo.db` lands there) on a free port, which replaces
//! `127.0.0.1:8642` in every command. Nothing sleeps to synchronise: a command that only reads
//! is run again until what the README promises shows up, within a deadline.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use tokio::process::Command;

use crate::support::process::{Running, START_DEADLINE, STEP_DEADLINE, eventually};

/// The address the README (and `config/demo.toml`) listen on.
const README_ADDR: &str = "127.0.0.1:8642";

/// One command of the README and what it must print.
#[derive(Debug)]
struct Step {
    command: String,
    expect: Vec<String>,
}

/// The `sh` code blocks of the README section "The two commands", each as its steps.
fn quick_start() -> Vec<Vec<Step>> {
    let readme = std::fs::read_to_string(repo().join("README.md")).expect("read README.md");
    let section = readme
        .split_once("## The two commands")
        .expect("the README has \"The two commands\"")
        .1;
    let section = section.split_once("**(b)").map_or(section, |(a, _)| a);
    let mut blocks = Vec::new();
    let mut parts = section.split("```");
    parts.next();
    while let (Some(block), _) = (parts.next(), parts.next()) {
        if let Some(body) = block.strip_prefix("sh\n") {
            blocks.push(steps(body));
        }
    }
    blocks
}

/// The commands of one code block: `\`-continued lines joined, narration comments skipped.
fn steps(body: &str) -> Vec<Step> {
    let mut steps: Vec<Step> = Vec::new();
    let mut pending = String::new();
    for line in body.lines() {
        let line = line.trim();
        if let Some(expect) = line.strip_prefix("# => ") {
            let step = steps.last_mut().expect("a `# =>` line follows a command");
            step.expect.push(expect.to_owned());
        } else if line.starts_with('#') || line.is_empty() {
            continue;
        } else if let Some(head) = line.strip_suffix('\\') {
            pending.push_str(head);
        } else {
            pending.push_str(line);
            steps.push(Step {
                command: std::mem::take(&mut pending),
                expect: Vec::new(),
            });
        }
    }
    steps
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `bash -c command` in `dir`, with the test's `baton` first on the PATH.
fn shell(dir: &Path, command: &str) -> Command {
    let bin = Path::new(crate::support::process::BATON).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = Command::new("bash");
    cmd.arg("-c")
        .arg(command)
        .current_dir(dir)
        .env("PATH", path)
        .env("USER", "alice")
        .env_remove("BATON_CONFIG")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}

async fn run(dir: &Path, command: &str) -> Output {
    let child = shell(dir, command).spawn().expect("spawn bash");
    match tokio::time::timeout(STEP_DEADLINE, child.wait_with_output()).await {
        Ok(out) => out.expect("wait for bash"),
        Err(_) => panic!("`{command}` did not finish within {STEP_DEADLINE:?}"),
    }
}

/// A command that changes something is run once; one that only reads is run until it prints
/// what the README says (the gateway answers a room post in the background).
fn writes(command: &str) -> bool {
    command.contains(" -d ") || command.contains(" | ")
}

#[tokio::test]
async fn the_quick_start_works_as_written() {
    let blocks = quick_start();
    assert_eq!(
        blocks.len(),
        2,
        "a block to start the demo, one to talk to it"
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("config")).unwrap();
    std::fs::copy(
        repo().join("config/demo.toml"),
        dir.path().join("config/demo.toml"),
    )
    .unwrap();

    // Block one: build once, put that build on the PATH, start the demo.
    let [build, path, start] = &blocks[0][..] else {
        panic!("block one is build, PATH, run: {:#?}", blocks[0]);
    };
    assert_eq!(build.command, "cargo build");
    assert_eq!(path.command, r#"export PATH="$PWD/target/debug:$PATH""#);
    assert!(start.command.starts_with("baton run "), "{start:?}");
    let (demo, out) = Running::spawn(shell(
        dir.path(),
        &format!("exec {} --listen 127.0.0.1:0", start.command),
    ));
    let base = tokio::time::timeout(START_DEADLINE, demo.base_url(out))
        .await
        .expect("the demo starts");
    let addr = base.strip_prefix("http://").unwrap();
    for line in &start.expect {
        assert_eq!(
            line.replace(README_ADDR, addr),
            format!("baton listening on {base}")
        );
    }

    // Block two: every command against the running demo, in order.
    for step in &blocks[1] {
        if step.command == path.command {
            continue;
        }
        assert!(
            !step.command.contains("cargo "),
            "every command after the build uses the built binary: {}",
            step.command
        );
        let command = step.command.replace(README_ADDR, addr);
        let printed = |out: &Output| String::from_utf8_lossy(&out.stdout).into_owned();
        let holds = |text: &str| step.expect.iter().all(|e| text.contains(e.as_str()));
        if writes(&command) {
            let out = run(dir.path(), &command).await;
            assert!(out.status.success(), "`{command}` failed: {out:?}");
            let text = printed(&out);
            assert!(
                holds(&text),
                "`{command}` printed {text:?}, not {:?}",
                step.expect
            );
        } else {
            let what = format!("`{command}` to print {:?}", step.expect);
            eventually(STEP_DEADLINE, &what, || async {
                let out = run(dir.path(), &command).await;
                (out.status.success() && holds(&printed(&out))).then_some(())
            })
            .await;
        }
    }

    // The ask named caid without addressing it: caid never answered in the room. Its turns in
    // the room's session are serial, so once it has answered a later message addressed to it,
    // any turn the ask had woken would have posted first.
    let rooms = format!("{base}/api/local/rooms/lobby/messages");
    let client = reqwest::Client::new();
    client
        .post(&rooms)
        .json(&serde_json::json!({"sender": "alice", "text": "@caid ping"}))
        .send()
        .await
        .unwrap();
    let caid_said = eventually(STEP_DEADLINE, "caid to answer `@caid ping`", || async {
        let body: serde_json::Value = client.get(&rooms).send().await.ok()?.json().await.ok()?;
        let messages = body.as_array()?;
        // Chain posts answer the admin's `/baton chain start`; leave them out.
        let commands: Vec<&serde_json::Value> = messages
            .iter()
            .filter(|m| m["author"] == "admin")
            .map(|m| &m["id"])
            .collect();
        let said: Vec<String> = messages
            .iter()
            .filter(|m| m["author"] == "caid" && !commands.contains(&&m["reply_to"]))
            .filter_map(|m| m["text"].as_str().map(str::to_owned))
            .collect();
        said.iter().any(|t| t == "ping").then_some(said)
    })
    .await;
    assert_eq!(
        caid_said,
        ["ping"],
        "caid answered only what was addressed to it"
    );
}

/// The README's test command (section "(b)") is the one CI runs (`.ci/run`).
#[test]
fn the_readme_test_command_is_what_ci_runs() {
    let readme = std::fs::read_to_string(repo().join("README.md")).expect("read README.md");
    let block = readme
        .split_once("**(b) Run the whole test suite**")
        .and_then(|(_, rest)| rest.split_once("```sh\n"))
        .and_then(|(_, rest)| rest.split_once("```"))
        .expect("the README has section (b) with an sh block")
        .0;
    let ci = std::fs::read_to_string(repo().join(".ci/run")).expect("read .ci/run");
    for command in block.lines().filter(|l| !l.trim().is_empty()) {
        assert!(
            ci.lines().any(|l| l.trim() == command.trim()),
            ".ci/run does not run the README's `{command}`"
        );
    }
}
