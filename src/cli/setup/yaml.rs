//! JSON values as YAML, for the manifests `baton setup` prints: block mappings and sequences,
//! every string quoted (JSON's escapes are valid in YAML's double quotes), so no value is read
//! back as another type.

use serde_json::Value;

/// `value` as a YAML document.
pub(super) fn to_yaml(value: &Value) -> String {
    let mut out = String::new();
    write(&mut out, value, 0);
    out
}

fn write(out: &mut String, value: &Value, indent: usize) {
    match value {
        Value::Object(map) => {
            for (key, item) in map {
                push_indent(out, indent);
                out.push_str(key);
                out.push(':');
                nested(out, item, indent);
            }
        }
        Value::Array(items) => {
            for item in items {
                push_indent(out, indent);
                out.push('-');
                nested(out, item, indent);
            }
        }
        scalar => {
            push_indent(out, indent);
            out.push_str(&scalar.to_string());
            out.push('\n');
        }
    }
}

/// What follows a key or a dash: a scalar on the same line, a collection indented below.
fn nested(out: &mut String, item: &Value, indent: usize) {
    match item {
        Value::Object(map) if !map.is_empty() => {
            out.push('\n');
            write(out, item, indent + 2);
        }
        Value::Array(items) if !items.is_empty() => {
            out.push('\n');
            write(out, item, indent + 2);
        }
        Value::Object(_) => out.push_str(" {}\n"),
        Value::Array(_) => out.push_str(" []\n"),
        scalar => {
            out.push(' ');
            out.push_str(&scalar.to_string());
            out.push('\n');
        }
    }
}

fn push_indent(out: &mut String, indent: usize) {
    out.extend(std::iter::repeat_n(' ', indent));
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn nested_collections_indent_and_strings_stay_quoted() {
        let doc = json!({ "a": { "b": ["x", "y"], "e": [], "on": true }, "n": "1" });
        assert_eq!(
            super::to_yaml(&doc),
            "a:\n  b:\n    - \"x\"\n    - \"y\"\n  e: []\n  on: true\nn: \"1\"\n"
        );
    }
}
