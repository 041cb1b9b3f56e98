//! What a run label may be. A label names runs on the command line
//! (`show LABEL`), so it must not read as a run id or `latest`; it is
//! printed in one-line rows and headers, so it must not carry a control
//! character that would break or rewrite them (a newline, an escape).

/// Why `label` is refused, or `None` if it is a good label. The message is
/// one line: the label is shown with its control characters escaped.
pub fn refusal(label: &str) -> Option<String> {
    let t = label.trim();
    if t.is_empty() || t.parse::<i64>().is_ok() || label == "latest" {
        return Some(format!(
            "bad --label {label:?}: a label must not be empty, a number or `latest`"
        ));
    }
    if label.chars().any(char::is_control) {
        return Some(format!(
            "bad --label {}: a label must not contain control characters (newlines, tabs, escapes)",
            label.escape_debug()
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::refusal;

    #[test]
    fn good_labels_pass() {
        for l in ["6.8.0-generic", "lab 1", "büro", "a-b_c.d", "x42"] {
            assert_eq!(refusal(l), None, "{l}");
        }
    }

    #[test]
    fn ids_latest_and_empty_are_refused() {
        for l in ["", "  ", "42", " 7 ", "-3", "latest"] {
            assert!(
                refusal(l).unwrap().contains("empty, a number or `latest`"),
                "{l:?}"
            );
        }
    }

    #[test]
    fn control_characters_are_refused_in_one_line() {
        for l in [
            "a\nb",
            "a\rb",
            "tab\there",
            "esc\u{1b}[31m",
            "nul\0",
            "del\u{7f}",
            "c1\u{85}",
        ] {
            let m = refusal(l).unwrap_or_else(|| panic!("{l:?} accepted"));
            assert!(m.contains("control characters"), "{m}");
            assert_eq!(m.lines().count(), 1, "{m}");
            assert!(!m.chars().any(char::is_control), "{m:?}");
        }
    }
}
