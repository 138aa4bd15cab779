//! The documentation against the code: every relative link and anchor in README.md and docs/
//! resolves; the configuration reference names exactly the keys the config model accepts
//! (read from the model itself, so a key added later fails here until it is documented); the
//! CLI reference names every `baton` subcommand; `deploy/baton.service` passes
//! `systemd-analyze verify` where systemd is installed.

use std::cell::RefCell;
use std::collections::BTreeSet;

use serde::de::{self, DeserializeSeed, Deserializer, IntoDeserializer, Visitor};

use super::*;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// README.md and every page under docs/.
fn pages() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    let mut pages = vec![repo().join("README.md")];
    walk(&repo().join("docs"), &mut pages);
    pages.sort();
    pages
}

/// The lines of a markdown text outside fenced code blocks.
fn prose(text: &str) -> impl Iterator<Item = &str> {
    let mut fenced = false;
    text.lines().filter(move |line| {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            return false;
        }
        !fenced
    })
}

/// GitHub's anchors for a page's headings (`## The two commands` -> `the-two-commands`, a
/// repeated heading gets `-1`, `-2`...).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    for line in prose(text) {
        let Some(title) = line.strip_prefix('#').map(|t| t.trim_start_matches('#')) else {
            continue;
        };
        if !title.starts_with(' ') {
            continue;
        }
        let slug: String = title
            .trim()
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let mut unique = slug.clone();
        let mut n = 0;
        while seen.contains(&unique) {
            n += 1;
            unique = format!("{slug}-{n}");
        }
        seen.insert(unique);
    }
    seen
}

/// The targets of the `[text](target)` links of a page's prose, inline code left out.
fn links(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for line in prose(text) {
        let mut outside = String::new();
        for (i, part) in line.split('`').enumerate() {
            if i % 2 == 0 {
                outside.push_str(part);
            }
        }
        let mut rest = outside.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            found.push(after[..end].trim().to_owned());
            rest = &after[end..];
        }
    }
    found
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let mut broken = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for link in links(&text) {
            if link.contains("://") || link.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = link.split_once('#').unwrap_or((&link, ""));
            let target = if path.is_empty() {
                page.clone()
            } else {
                page.parent().unwrap().join(path)
            };
            let shown = format!("{}: {link}", page.strip_prefix(repo()).unwrap().display());
            if !target.exists() {
                broken.push(format!("{shown} (no such file)"));
            } else if !anchor.is_empty() {
                let body = std::fs::read_to_string(&target).unwrap_or_default();
                if !anchors(&body).contains(anchor) {
                    broken.push(format!("{shown} (no such heading)"));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_readme_is_short_and_links_to_connecting_slack() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    assert!(readme.lines().count() <= 250, "README.md over 250 lines");
    assert!(
        readme.contains("](docs/platforms/slack.md)"),
        "no link to the Slack page"
    );
    let benchmarks = std::fs::read_to_string(repo().join("BENCHMARKS.md")).unwrap();
    assert!(
        benchmarks.lines().count() <= 300,
        "BENCHMARKS.md over 300 lines"
    );
}

/// Every key the config model accepts, as dotted paths (`gateway.listen`, `bots.cron.prompt`):
/// the model's own `Deserialize` is driven by [`Probe`], which answers every struct with all
/// of its fields and every list with one element.
fn accepted_keys() -> BTreeSet<String> {
    let keys = RefCell::new(BTreeSet::new());
    baton::config::Config::deserialize(Probe {
        path: String::new(),
        keys: &keys,
    })
    .expect("the probe reads every key of the config model");
    keys.into_inner()
}

use serde::Deserialize as _;

/// A deserializer that walks a type's shape instead of reading data: each value it is asked
/// for is a stand-in of the asked type, and each leaf's key path is recorded.
struct Probe<'k> {
    path: String,
    keys: &'k RefCell<BTreeSet<String>>,
}

impl Probe<'_> {
    fn leaf(&self) {
        self.keys.borrow_mut().insert(self.path.clone());
    }
}

type ProbeError = de::value::Error;

macro_rules! leaf {
    ($($method:ident => $visit:ident($($value:expr)?)),* $(,)?) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ProbeError> {
            self.leaf();
            visitor.$visit($($value)?)
        }
    )*};
}

impl<'de> Deserializer<'de> for Probe<'_> {
    type Error = ProbeError;

    leaf! {
        deserialize_any => visit_str(""),
        deserialize_bool => visit_bool(false),
        deserialize_i8 => visit_i64(0),
        deserialize_i16 => visit_i64(0),
        deserialize_i32 => visit_i64(0),
        deserialize_i64 => visit_i64(0),
        deserialize_u8 => visit_u64(0),
        deserialize_u16 => visit_u64(0),
        deserialize_u32 => visit_u64(0),
        deserialize_u64 => visit_u64(0),
        deserialize_f32 => visit_f64(0.0),
        deserialize_f64 => visit_f64(0.0),
        deserialize_char => visit_char('x'),
        deserialize_str => visit_str(""),
        deserialize_string => visit_str(""),
        deserialize_identifier => visit_str(""),
        deserialize_unit => visit_unit(),
        deserialize_ignored_any => visit_unit(),
        deserialize_bytes => visit_bytes(&[]),
        deserialize_byte_buf => visit_bytes(&[]),
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ProbeError> {
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        visitor: V,
    ) -> Result<V::Value, ProbeError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ProbeError> {
        visitor.visit_seq(One(Some(self)))
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ProbeError> {
        // A table with free-form keys: documented as `path.*`.
        self.keys.borrow_mut().insert(format!("{}.*", self.path));
        visitor.visit_map(de::value::MapDeserializer::new(std::iter::empty::<(
            &str,
            &str,
        )>()))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, ProbeError> {
        visitor.visit_map(Fields {
            probe: self,
            fields: fields.iter(),
            current: "",
        })
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, ProbeError> {
        self.leaf();
        visitor.visit_enum(variants[0].into_deserializer())
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        visitor: V,
    ) -> Result<V::Value, ProbeError> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        _: usize,
        visitor: V,
    ) -> Result<V::Value, ProbeError> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: usize,
        visitor: V,
    ) -> Result<V::Value, ProbeError> {
        self.deserialize_seq(visitor)
    }
}

/// A list of one element, itself probed at the list's path.
struct One<'k>(Option<Probe<'k>>);

impl<'de> de::SeqAccess<'de> for One<'_> {
    type Error = ProbeError;
    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, ProbeError> {
        self.0
            .take()
            .map(|probe| seed.deserialize(probe))
            .transpose()
    }
}

/// A struct's fields, each probed at `path.field`.
struct Fields<'k> {
    probe: Probe<'k>,
    fields: std::slice::Iter<'static, &'static str>,
    current: &'static str,
}

impl<'de> de::MapAccess<'de> for Fields<'_> {
    type Error = ProbeError;
    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, ProbeError> {
        let Some(field) = self.fields.next() else {
            return Ok(None);
        };
        self.current = field;
        seed.deserialize(field.into_deserializer()).map(Some)
    }
    fn next_value_seed<V: DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, ProbeError> {
        let path = if self.probe.path.is_empty() {
            self.current.to_owned()
        } else {
            format!("{}.{}", self.probe.path, self.current)
        };
        seed.deserialize(Probe {
            path,
            keys: self.probe.keys,
        })
    }
}

/// The keys the configuration reference documents: the first cell of its table rows, a
/// dotted key path in backticks.
fn documented_keys() -> BTreeSet<String> {
    let text = std::fs::read_to_string(repo().join("docs/configuration.md")).unwrap();
    prose(&text)
        .filter_map(|line| line.strip_prefix("| `"))
        .filter_map(|rest| rest.split_once("` |").map(|(key, _)| key.to_owned()))
        .collect()
}

#[test]
fn the_configuration_reference_names_exactly_the_accepted_keys() {
    let accepted = accepted_keys();
    assert!(
        accepted.contains("gateway.listen") && accepted.contains("bots.cron.prompt"),
        "the probe walks nested tables and lists: {accepted:?}"
    );
    let documented = documented_keys();
    let undocumented: Vec<&String> = accepted.difference(&documented).collect();
    let unknown: Vec<&String> = documented.difference(&accepted).collect();
    assert!(
        undocumented.is_empty() && unknown.is_empty(),
        "docs/configuration.md is out of step with the config model.\n\
         accepted but not documented (add a row `| `KEY` | type | default | example |`): {undocumented:?}\n\
         documented but not accepted: {unknown:?}"
    );
}

#[test]
fn the_cli_reference_names_every_subcommand() {
    use clap::CommandFactory as _;
    let text = std::fs::read_to_string(repo().join("docs/cli.md")).unwrap();
    let mut missing = Vec::new();
    for command in baton::cli::Cli::command().get_subcommands() {
        let name = format!("baton {}", command.get_name());
        if !text.contains(&format!("`{name}")) {
            missing.push(name.clone());
        }
        for sub in command.get_subcommands() {
            let nested = format!("{name} {}", sub.get_name());
            if !text.contains(&nested) {
                missing.push(nested);
            }
        }
    }
    assert!(missing.is_empty(), "not in docs/cli.md: {missing:?}");
}

#[test]
fn the_systemd_unit_verifies() {
    let analyze = Path::new("/usr/bin/systemd-analyze");
    if !analyze.exists() {
        // Where systemd is not installed there is nothing to verify the unit with.
        return;
    }
    let unit = std::fs::read_to_string(repo().join("deploy/baton.service")).unwrap();
    assert!(
        unit.contains("ExecStart=/usr/local/bin/baton run"),
        "{unit}"
    );
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("baton.service");
    // The installed binary's path, here the one under test, so verify finds an executable.
    std::fs::write(
        &copy,
        unit.replace("/usr/local/bin/baton", crate::support::process::BATON),
    )
    .unwrap();
    let out = std::process::Command::new(analyze)
        .args(["verify", "--man=no"])
        .arg(&copy)
        .output()
        .unwrap();
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "systemd-analyze verify deploy/baton.service:\n{}",
        show(&out)
    );
}
