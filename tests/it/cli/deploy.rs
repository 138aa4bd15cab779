//! The deployment files in deploy/ (Kubernetes manifests, compose.yaml, the Dockerfile) against
//! the real binary: every environment variable they give baton is one that deploy/baton.toml
//! names (or `BATON_CONFIG`) and every one it names is given; that config passes `baton check`;
//! the probes' and the scrape's paths answer 200; every command they give the image is a real
//! `baton` subcommand with arguments it takes.

use std::collections::BTreeSet;

use serde::Deserialize as _;
use serde_yaml::Value as Yaml;

use super::*;

fn deploy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy")
}

/// Every document of a YAML file.
fn documents(path: &Path) -> Vec<Yaml> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_yaml::Deserializer::from_str(&text)
        .map(|doc| Yaml::deserialize(doc).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .collect()
}

/// The Kubernetes manifests: every document of every `.yaml` but the kustomization.
fn manifests() -> Vec<Yaml> {
    let dir = deploy().join("kubernetes");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .filter(|p| !p.ends_with("kustomization.yaml"))
        .collect();
    files.sort();
    files.iter().flat_map(|f| documents(f)).collect()
}

fn of_kind<'a>(docs: &'a [Yaml], kind: &str) -> Vec<&'a Yaml> {
    docs.iter().filter(|d| d["kind"] == kind).collect()
}

fn strings(value: &Yaml) -> Vec<String> {
    value
        .as_sequence()
        .map(|s| {
            s.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn keys(value: &Yaml) -> BTreeSet<String> {
    value
        .as_mapping()
        .map(|m| {
            m.keys()
                .filter_map(|k| k.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The variables a config names: the values of its keys ending in `_env`, at any depth.
fn named_variables(value: &toml::Value, out: &mut BTreeSet<String>) {
    match value {
        toml::Value::Table(table) => {
            for (key, value) in table {
                match value {
                    toml::Value::String(name) if key.ends_with("_env") => {
                        out.insert(name.clone());
                    }
                    other => named_variables(other, out),
                }
            }
        }
        toml::Value::Array(items) => items.iter().for_each(|v| named_variables(v, out)),
        _ => {}
    }
}

/// The containers of the manifests' Deployments and Jobs.
fn containers(docs: &[Yaml]) -> Vec<&Yaml> {
    let mut found = Vec::new();
    for kind in ["Deployment", "Job"] {
        for doc in of_kind(docs, kind) {
            let spec = &doc["spec"]["template"]["spec"]["containers"];
            found.extend(spec.as_sequence().expect("containers"));
        }
    }
    found
}

/// compose.yaml's baton services (those built from the Dockerfile).
fn compose_batons(compose: &Yaml) -> Vec<&Yaml> {
    let services = compose["services"].as_mapping().expect("services");
    let batons: Vec<&Yaml> = services
        .values()
        .filter(|s| s.get("build").is_some())
        .collect();
    assert!(batons.len() >= 2, "two instances at least");
    batons
}

#[test]
fn every_variable_the_deploy_files_set_is_one_the_config_names() {
    let config: toml::Value =
        toml::from_str(&std::fs::read_to_string(deploy().join("baton.toml")).unwrap()).unwrap();
    let mut named = BTreeSet::new();
    named_variables(&config, &mut named);
    assert!(named.contains("BATON_DATABASE_URL"), "{named:?}");
    let mut allowed = named.clone();
    allowed.insert("BATON_CONFIG".to_owned());

    let docs = manifests();
    let secrets = of_kind(&docs, "Secret");
    assert_eq!(secrets.len(), 1, "one Secret");
    let secret = keys(&secrets[0]["stringData"]);
    let secret_name = secrets[0]["metadata"]["name"].as_str().unwrap();
    assert_eq!(
        secret, named,
        "the Secret sets exactly what the config names"
    );
    for container in containers(&docs) {
        for from in container["envFrom"].as_sequence().into_iter().flatten() {
            assert_eq!(from["secretRef"]["name"], secret_name, "{from:?}");
        }
        for var in container["env"].as_sequence().into_iter().flatten() {
            let name = var["name"].as_str().unwrap();
            assert!(allowed.contains(name), "{name} is not named by the config");
        }
    }
    for monitor in of_kind(&docs, "ServiceMonitor") {
        for endpoint in monitor["spec"]["endpoints"].as_sequence().unwrap() {
            let token = &endpoint["authorization"]["credentials"];
            assert_eq!(token["name"], secret_name);
            assert!(named.contains(token["key"].as_str().unwrap()), "{token:?}");
        }
    }

    let compose = &documents(&deploy().join("compose.yaml"))[0];
    for service in compose_batons(compose) {
        let set = keys(&service["environment"]);
        let unknown: Vec<_> = set.difference(&allowed).collect();
        assert!(unknown.is_empty(), "not named by the config: {unknown:?}");
        let unset: Vec<_> = named.difference(&set).collect();
        assert!(unset.is_empty(), "named by the config, not set: {unset:?}");
    }

    // The config itself passes `baton check` with those variables set.
    let mut check = std::process::Command::new(crate::support::process::BATON);
    check
        .args(["check", "--config"])
        .arg(deploy().join("baton.toml"))
        .env_remove("BATON_CONFIG");
    for name in &named {
        let value = if name == "BATON_DATABASE_URL" {
            "postgres://baton:pw@db.example:5432/baton?sslmode=require"
        } else {
            "xoxb-placeholder"
        };
        check.env(name, value);
    }
    let out = check.output().unwrap();
    assert!(out.status.success(), "{}", show(&out));
}

#[test]
fn every_command_given_to_the_image_is_a_baton_subcommand() {
    let docs = manifests();
    let mut commands: Vec<Vec<String>> = containers(&docs)
        .iter()
        .map(|c| strings(&c["args"]))
        .collect();
    let compose = &documents(&deploy().join("compose.yaml"))[0];
    commands.extend(
        compose_batons(compose)
            .iter()
            .filter(|s| s.get("command").is_some())
            .map(|s| strings(&s["command"])),
    );
    let dockerfile =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Dockerfile")).unwrap();
    let cmd = dockerfile
        .lines()
        .find_map(|l| l.strip_prefix("CMD "))
        .expect("the Dockerfile's CMD");
    commands.push(serde_json::from_str(cmd).expect("CMD in exec form"));
    assert!(
        commands
            .iter()
            .any(|c| c.first().is_some_and(|s| s == "run"))
    );
    assert!(
        commands
            .iter()
            .any(|c| c.first().is_some_and(|s| s == "migrate"))
    );
    for command in commands {
        let out = std::process::Command::new(crate::support::process::BATON)
            .args(&command)
            .arg("--help")
            .output()
            .unwrap();
        assert!(out.status.success(), "baton {command:?}: {}", show(&out));
    }
}

#[tokio::test]
async fn the_probes_and_the_scrape_path_answer() {
    let docs = manifests();
    let mut paths = BTreeSet::new();
    for container in containers(&docs) {
        for probe in ["readinessProbe", "livenessProbe"] {
            if let Some(path) = container[probe]["httpGet"]["path"].as_str() {
                paths.insert(path.to_owned());
            }
        }
    }
    for monitor in of_kind(&docs, "ServiceMonitor") {
        for endpoint in monitor["spec"]["endpoints"].as_sequence().unwrap() {
            paths.insert(endpoint["path"].as_str().unwrap().to_owned());
        }
    }
    assert!(
        paths.len() >= 3,
        "readiness, liveness and scrape paths: {paths:?}"
    );

    let dir = tempfile::tempdir().unwrap();
    let mut cmd = baton(dir.path());
    cmd.args([
        "run",
        "--listen",
        "127.0.0.1:0",
        "--database",
        ":memory:",
        "--config",
    ])
    .arg(demo_config());
    let (mut gateway, out) = Running::spawn(cmd);
    let base = gateway.base_url(out).await;
    let http = reqwest::Client::new();
    for path in &paths {
        eventually(START_DEADLINE, &format!("GET {path} = 200"), || async {
            let r = http.get(format!("{base}{path}")).send().await.ok()?;
            (r.status() == 200).then_some(())
        })
        .await;
    }
    gateway.terminate();
    gateway.wait(EXIT_DEADLINE).await;
}
